"""Each family's config.json mapping, declared once (bertjax.hf.config_map), read both ways."""
import dataclasses

import pytest

from bertjax.hf import registry
from bertjax.hf.config_map import ConfigMap, Field
from bertjax.layers.long_attention import sparse

# Every encoder field config.json carries, away from its default (BERT-style key names).
_ENCODER = dict(vocab_size=101, hidden_size=48, num_layers=3, num_heads=3, intermediate_size=37,
                hidden_act="relu", hidden_dropout=0.05, attention_dropout=0.15,
                max_position_embeddings=70, type_vocab_size=3, layer_norm_eps=1e-6,
                initializer_range=0.03, pad_token_id=2, labels=("no", "yes", "maybe"),
                problem_type="multi_label_classification", classifier_dropout=0.25)
_BIGBIRD_ATTENTION = sparse.BigBird(block_size=4, num_random_blocks=2, random_seed=0,
                                    eval_plan="zeros", plan_max_length=70)
_DEBERTA = dict(_ENCODER, relative_attention=False, max_relative_positions=16,
                position_biased_input=True, pos_att_type=("p2c",), legacy_mlm_head=False,
                pooler_dropout=0.1, pooler_hidden_act="tanh")

# model_type -> (a config of every mapped field away from its default, one of its classes).
# Fields config.json does not carry (dtype, remat, ...) keep their defaults.
NON_DEFAULT = {
    "bert": (_ENCODER, "BertForSequenceClassification"),
    "roberta": (_ENCODER, "RobertaForMaskedLM"),
    "big_bird": (dict(_ENCODER, sep_token_id=7, attention=_BIGBIRD_ATTENTION), "BigBirdModel"),
    "longformer": (dict(_ENCODER, sep_token_id=7, attention=sparse.Longformer(
        window=(2, 3, 4), global_tokens=())), "LongformerForTokenClassification"),
    "albert": (dict(_ENCODER, embedding_size=24, num_hidden_groups=3), "AlbertForPreTraining"),
    "electra": (dict(_ENCODER, embedding_size=24, summary_type="mean", summary_activation="tanh",
                     summary_last_dropout=0.2), "ElectraForMultipleChoice"),
    "deberta": (dict(_DEBERTA, version=1, position_buckets=-1, share_att_key=False,
                     norm_rel_ebd=False), "DebertaForQuestionAnswering"),
    "deberta-v2": (dict(_DEBERTA, version=2, embedding_size=32, position_buckets=64,
                        share_att_key=False, norm_rel_ebd=False), "DebertaV2ForMultipleChoice"),
    "distilbert": (dict(vocab_size=101, hidden_size=48, num_layers=3, num_heads=3,
                        intermediate_size=37, hidden_act="relu", hidden_dropout=0.05,
                        attention_dropout=0.15, max_position_embeddings=70,
                        initializer_range=0.03, pad_token_id=2, labels=("no", "yes"),
                        problem_type="regression", seq_classif_dropout=0.3, qa_dropout=0.4),
                   "DistilBertForSequenceClassification"),
    "xlnet": (dict(vocab_size=101, hidden_size=48, num_layers=3, num_heads=3,
                   intermediate_size=37, hidden_act="relu", hidden_dropout=0.05,
                   layer_norm_eps=1e-6,
                   initializer_range=0.03, attn_type="uni", bi_data=True, clamp_len=9,
                   same_length=True, mem_len=6, reuse_len=4, pad_token_id=2,
                   labels=("no", "yes", "maybe"), problem_type="single_label_classification",
                   summary_type="mean", summary_last_dropout=0.2), "XLNetForMultipleChoice"),
    "modernbert": (dict(vocab_size=101, hidden_size=48, num_layers=4, num_heads=3,
                        intermediate_size=37, hidden_act="silu", hidden_dropout=0.05,
                        attention_dropout=0.15, max_position_embeddings=70, layer_norm_eps=1e-6,
                        initializer_range=0.03, pad_token_id=2, cls_token_id=3, sep_token_id=4,
                        rotary_base=5000.0, local_rotary_base=700.0, global_attn_every_n_layers=2,
                        local_attention=16, embedding_dropout=0.1, norm_bias=True,
                        attention_bias=True, mlp_bias=True, decoder_bias=False,
                        classifier_bias=True, classifier_activation="tanh",
                        classifier_pooling="mean", classifier_dropout=0.2, labels=("no", "yes"),
                        problem_type="regression"), "ModernBertForSequenceClassification"),
    "gpt2": (dict(vocab_size=101, hidden_size=48, num_layers=3, num_heads=3, intermediate_size=37,
                  max_position_embeddings=70, hidden_act="relu", hidden_dropout=0.05,
                  embedding_dropout=0.2, attention_dropout=0.15, layer_norm_eps=1e-6,
                  initializer_range=0.03, bos_token_id=1, eos_token_id=2, pad_token_id=3),
             "GPT2LMHeadModel"),
    "openai-gpt": (dict(vocab_size=101, hidden_size=48, num_layers=3, num_heads=3,
                        intermediate_size=192, max_position_embeddings=70, hidden_act="relu",
                        hidden_dropout=0.05, embedding_dropout=0.2, attention_dropout=0.15,
                        layer_norm_eps=1e-6, initializer_range=0.03, bos_token_id=1, eos_token_id=2,
                        pad_token_id=3, pre_norm=False), "OpenAIGPTModel"),
    "t5": (dict(vocab_size=101, hidden_size=48, head_dim=16, intermediate_size=37, num_layers=2,
                num_decoder_layers=3, num_heads=4, relative_buckets=8, relative_max_distance=20,
                hidden_dropout=0.2, layer_norm_eps=1e-5, hidden_act="gelu_new", gated=True,
                tie_word_embeddings=False, scale_decoder_outputs=True, initializer_factor=0.5,
                pad_token_id=3, eos_token_id=4, decoder_start_token_id=5),
           "T5ForConditionalGeneration"),
    "bart": (dict(vocab_size=101, hidden_size=48, encoder_layers=2, decoder_layers=3,
                  encoder_heads=4, decoder_heads=3, encoder_ffn_size=37, decoder_ffn_size=29,
                  hidden_act="relu", hidden_dropout=0.2, attention_dropout=0.1,
                  activation_dropout=0.05,
                  max_position_embeddings=70, initializer_range=0.03, scale_embedding=True,
                  pad_token_id=3, bos_token_id=4, eos_token_id=5, decoder_start_token_id=6,
                  forced_bos_token_id=4, forced_eos_token_id=None), "BartModel"),
}


def test_every_family_declares_its_mapping_and_a_non_default_config_here():
  assert set(NON_DEFAULT) == set(registry.FAMILIES)
  for model_type in registry.FAMILIES:
    assert isinstance(registry.family_for(model_type).config_map, ConfigMap), model_type


@pytest.mark.parametrize("model_type", sorted(NON_DEFAULT))
def test_config_round_trips_through_config_json(model_type):
  family = registry.family_for(model_type)
  fields, architecture = NON_DEFAULT[model_type]
  config = family.config_class(**fields)
  for name, value in fields.items():  # the config really is away from the defaults
    default = getattr(family.config_class(), name)
    assert value != default or name in ("pre_norm", "version"), (name, value)
  hf_config = family.config_to_hf(config, architecture)
  assert hf_config["model_type"] == model_type and hf_config["architectures"] == [architecture]
  assert family.config_from_hf(hf_config) == config


@pytest.mark.parametrize("model_type, key, value, message", [
    ("albert", "inner_group_num", 2, "inner_group_num=2 is not supported for ALBERT; only 1 is"),
    ("bert", "position_embedding_type", "relative_key",
     "position_embedding_type='relative_key' is not supported for BERT; only 'absolute' is"),
    ("electra", "tie_word_embeddings", False,
     "tie_word_embeddings=False is not supported for ELECTRA; only True is: the generator's"),
    ("gpt2", "scale_attn_weights", False, "scale_attn_weights=False is not supported for GPT-2"),
    ("big_bird", "is_decoder", True, "is_decoder=True is not supported for BigBird"),
])
def test_a_config_json_with_another_value_of_a_constant_is_refused(model_type, key, value,
                                                                   message):
  family = registry.family_for(model_type)
  family.config_from_hf({"model_type": model_type})  # without the key: the supported value
  with pytest.raises(ValueError, match=f"^config.json: {message}"):
    family.config_from_hf({"model_type": model_type, key: value})


@dataclasses.dataclass(frozen=True)
class _Toy:
  width: int = 4
  names: tuple[str, ...] = ()
  rate: float | None = None
  dtype: str = "float32"

  @property
  def twice(self) -> int:
    return 2 * self.width


_TOY_MAP = ConfigMap(
    "Toy",
    (Field("size", "width", default=8), Field("twice", "twice", read=False),
     Field("names", "names", to_hf=list, from_hf=tuple),
     Field("rate", "rate", omit_none=True),
     Field("dtype", "dtype", written=False)),
    constants={"flavour": "plain"}, checked={"exotic": False}, hf_only={"tied": True},
    reasons={"flavour": "the only one there is"}, labels=False)


def test_config_map_reads_and_writes_each_kind_of_entry():
  assert _TOY_MAP.read({}) == {"width": 8}  # a missing key: transformers' default
  assert _TOY_MAP.read({"size": 3, "twice": 99, "names": ["a"], "rate": None,
                        "dtype": "bfloat16", "flavour": "plain", "tied": False}) == {
      "width": 3, "names": ("a",), "rate": None, "dtype": "bfloat16"}
  assert _TOY_MAP.write(_Toy(width=3, names=("a",), dtype="bfloat16")) == {
      "size": 3, "twice": 6, "names": ["a"], "flavour": "plain", "tied": True}
  assert _TOY_MAP.write(_Toy(rate=0.5))["rate"] == 0.5
  with pytest.raises(ValueError, match="flavour='spicy' is not supported for Toy; only 'plain' "
                                       "is: the only one there is"):
    _TOY_MAP.read({"flavour": "spicy"})
  with pytest.raises(ValueError, match="exotic=True"):
    _TOY_MAP.read({"exotic": True})
