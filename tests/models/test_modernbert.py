"""ModernBERT equals transformers' ModernBert classes, through from_hf / to_hf; its sliding
window restricts attention, and its published sizes have transformers' parameter counts."""
import gin
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import transformers

import bertjax
from bertjax.models import modernbert
from tests.helpers import hf as hf_helpers, parity, pretraining

# 5 layers, global every 2nd (layers 0, 2, 4), a 6-token window (3 keys either side) over
# rows of up to 19 tokens, rotary bases far from the defaults; eager attention on the torch
# side (loading and reloading), which, as ours, gives a padding query whose keys are all
# masked uniform weights, where SDPA differs.
ODD_CONFIG = dict(vocab_size=101, hidden_size=48, num_hidden_layers=5, num_attention_heads=4,
                  intermediate_size=40, global_attn_every_n_layers=2, local_attention=6,
                  global_rope_theta=500.0, local_rope_theta=50.0, max_position_embeddings=64,
                  pad_token_id=0, bos_token_id=1, eos_token_id=2, cls_token_id=1,
                  sep_token_id=2, attn_implementation="eager")
# Every bias and the other options flipped: norms, projections and the head's dense layer
# with biases, no decoder bias, mean pooling, tanh-GELU, global every 3rd layer.
BIASED_CONFIG = dict(ODD_CONFIG, norm_bias=True, attention_bias=True, mlp_bias=True,
                     classifier_bias=True, decoder_bias=False, classifier_pooling="mean",
                     hidden_activation="gelu_pytorch_tanh", classifier_activation="silu",
                     global_attn_every_n_layers=3, norm_eps=1e-6)
LENGTHS = (19, 12, 4)
BATCHES = parity.encoder_batches(ODD_CONFIG["vocab_size"], lengths=LENGTHS, type_vocab_size=0,
                                 first_id=3)
CHOICES = parity.choice_batches(ODD_CONFIG["vocab_size"], lengths=(19, 12, 4, 9, 5, 19),
                                type_vocab_size=0, first_id=3)
EXPECT = {"family.name": "modernbert", "config.global_attn_every_n_layers": 2,
          "config.local_attention": 6, "config.rotary_base": 500.0,
          "config.local_rotary_base": 50.0}
EXPORTED = {"global_attn_every_n_layers": 2, "local_attention": 6, "cls_token_id": 1}
EAGER = {"attn_implementation": "eager"}

CASES = parity.table(
    parity.Case(transformers.ModernBertModel, ODD_CONFIG, ("last_hidden_state", "hidden_states"),
                **BATCHES, expect=EXPECT, expect_exported=EXPORTED, reload_kwargs=EAGER),
    parity.Case(transformers.ModernBertForMaskedLM, ODD_CONFIG, ("logits", "hidden_states"),
                **BATCHES, expect=EXPECT, expect_exported=EXPORTED, reload_kwargs=EAGER),
    parity.Case(transformers.ModernBertModel, BIASED_CONFIG,
                ("last_hidden_state", "hidden_states"), **BATCHES, name="ModernBertModel-biases",
                expect={"config.norm_bias": True, "config.global_attn_every_n_layers": 3},
                expect_exported={"norm_bias": True, "mlp_bias": True}, reload_kwargs=EAGER),
    parity.Case(transformers.ModernBertForMaskedLM, BIASED_CONFIG, ("logits",), **BATCHES,
                name="ModernBertForMaskedLM-biases", expect={"config.decoder_bias": False},
                expect_exported={"decoder_bias": False}, reload_kwargs=EAGER),
    *parity.task_cases("ModernBert", ODD_CONFIG, BATCHES, CHOICES,
                       expect={"family.name": "modernbert"}, reload_kwargs=EAGER),
    # Mean-pooled sequences through two norms whose scales the redraw centres on 0 vary
    # less: still a hundred times the tolerance.
    *[parity.Case(case.model_class, dict(BIASED_CONFIG, **{
        k: v for k, v in case.config.items() if k in ("id2label", "num_labels")}),
        case.outputs, case.inputs, case.export_inputs, name=f"{case.id}-mean-biases",
        expect={"config.classifier_pooling": "mean"},
        expect_exported={"classifier_pooling": "mean"}, reload_kwargs=EAGER, min_std=0.01)
      for case in parity.task_cases("ModernBert", ODD_CONFIG, BATCHES, CHOICES)],
)
test_matches_transformers_and_round_trips = parity.parametrized(CASES)


@pytest.fixture(scope="module")
def reference_and_model(tmp_path_factory):
  reference, path = parity.save_reference(CASES["ModernBertModel"],
                                          tmp_path_factory.mktemp("modernbert"))
  return reference, bertjax.from_hf(path)


def test_window_really_restricts_attention(reference_and_model):
  """The local layers (1 and 3) give no weight to keys more than local_attention / 2 = 3
  positions away, the global ones do, and every layer's probabilities are transformers'."""
  reference, ours = reference_and_model
  inputs = BATCHES["inputs"][0]
  got = ours(**inputs, output_attentions=True)["attentions"]  # [layers, B, heads, Q, K]
  expected = hf_helpers.torch_outputs(reference, inputs, output_attentions=True)["attentions"]
  assert got.shape == expected.shape == (5, 3, 4, 19, 19)
  np.testing.assert_allclose(got, expected, atol=1e-5)
  index = np.arange(19)
  far = np.abs(index[:, None] - index[None, :]) > 3
  for layer in range(5):
    # The first row has no padding (a padding query whose window holds only padding spreads
    # its weight uniformly, in transformers as here).
    far_weight = got[layer][0][:, far].max()
    if ours.config.is_global(layer):
      assert far_weight > 1e-3, layer
    else:
      assert far_weight == 0.0, layer


def test_head_mask_reaches_each_unrolled_layer(reference_and_model):
  """The layers are separate modules, not a scan: a [layers, heads] head mask still finds
  each one (bertjax.models.common.attention_maps). A head mask sends the local layers to
  the dense form of their window (bertjax.layers.sliding_window), equal up to rounding."""
  _, ours = reference_and_model
  inputs = BATCHES["inputs"][0]
  plain = ours(**inputs)["last_hidden_state"]
  np.testing.assert_allclose(ours(**inputs, head_mask=np.ones((5, 4)))["last_hidden_state"],
                             plain, atol=1e-5)
  mask = np.ones((5, 4))
  mask[3, 1] = 0.0
  out = ours(**inputs, head_mask=mask, output_attentions=True)
  assert not out["attentions"][3][:, 1].any() and out["attentions"][2][:, 1].any()
  assert np.abs(out["last_hidden_state"] - plain).max() > 1e-2


def test_packed_rows_equal_each_example_alone(reference_and_model):
  """segment_ids keep two packed examples apart and position_ids restart their rotations."""
  _, ours = reference_and_model
  run = jax.jit(lambda ids, **kw: ours.module.apply({"params": ours.params}, ids,
                                                    **kw)["last_hidden_state"])
  a, b = np.arange(3, 12)[None], np.arange(40, 46)[None]
  packed = run(np.concatenate([a, b], -1), position_ids=np.array([list(range(9)) + list(range(6))]),
               segment_ids=np.array([[1] * 9 + [2] * 6]))
  np.testing.assert_allclose(packed[:, :9], run(a), atol=1e-5)
  np.testing.assert_allclose(packed[:, 9:], run(b), atol=1e-5)


def test_remat_and_bfloat16_keep_the_outputs(reference_and_model):
  _, ours = reference_and_model
  ids = BATCHES["inputs"][0]["input_ids"]
  mask = BATCHES["inputs"][0]["attention_mask"]
  run = lambda config: np.asarray(modernbert.ModernBertModel(config).apply(
      {"params": ours.params}, ids, mask)["last_hidden_state"], np.float32)
  base = run(ours.config)
  np.testing.assert_allclose(run(ours.config.replace(remat=True)), base, atol=1e-6)
  assert np.abs(run(ours.config.replace(dtype="bfloat16")) - base).max() < 0.1


@pytest.mark.parametrize("size", sorted(modernbert.SIZES))
def test_parameter_counts_equal_reference(size):
  cfg = modernbert.SIZES[size]()
  hf_config = transformers.ModernBertConfig(
      vocab_size=cfg.vocab_size, hidden_size=cfg.hidden_size, num_hidden_layers=cfg.num_layers,
      num_attention_heads=cfg.num_heads, intermediate_size=cfg.intermediate_size)
  ours = hf_helpers.parameter_count(lambda: modernbert.ModernBertForMaskedLM(cfg).init(
      jax.random.PRNGKey(0), jnp.zeros((1, 8), jnp.int32))["params"])
  assert ours == hf_helpers.reference_parameter_count(transformers.ModernBertForMaskedLM,
                                                      hf_config)
  if size in ("base", "large"):  # the published totals, rounded (149M, 395M)
    assert round(ours / 1e6) == {"base": 150, "large": 396}[size], ours


def test_config_errors_name_the_field():
  with pytest.raises(ValueError, match="rotary positions and pre-norm"):
    modernbert.modernbert_tiny(pre_norm=False)
  with pytest.raises(ValueError, match="local_attention=7"):
    modernbert.modernbert_tiny(local_attention=7)
  with pytest.raises(ValueError, match="token types"):
    modernbert.modernbert_tiny(type_vocab_size=2)
  with pytest.raises(ValueError, match="classifier_pooling='max'"):
    modernbert.modernbert_tiny(classifier_pooling="max")
  family = bertjax.hf.registry.family_for("modernbert")
  with pytest.raises(ValueError, match="layer_types"):
    family.config_from_hf({"num_hidden_layers": 3, "layer_types": [
        "sliding_attention", "full_attention", "full_attention"]})
  with pytest.raises(ValueError, match="rotary scaling"):
    family.config_from_hf({"rope_parameters": {"full_attention": {"rope_type": "linear",
                                                                  "factor": 2.0}}})
  with pytest.raises(ValueError, match="tie_word_embeddings"):
    family.config_from_hf({"tie_word_embeddings": False})


RECIPE = ("runs/modernbert_pretrain.gin", "models/modernbert_tiny.gin",
          "objectives/modernbert_mlm.gin")


def test_pretraining_recipe_masks_30_percent_and_learns(tmp_path):
  """The recipe's data selects 30% of the real tokens, and a tiny ModernBERT's MLM loss
  falls over 40 steps of it (tests/test_gin_configs.py also runs it on its own vocabulary)."""
  from bertjax import main
  from bertjax.data import recipes
  gin.clear_config()
  try:
    main.parse_gin(list(RECIPE), pretraining.run_bindings(steps=2, batch_size=16, length=64))
    batches = recipes.get_dataset("roberta_mlm", split="train", sequence_length=64,
                                  batch_size=16, seed=0).take(4).as_numpy_iterator()
    selected = real = 0
    for batch in batches:
      selected += batch["mlm_weights"].sum()
      real += batch["attention_mask"].sum()
  finally:
    gin.clear_config()
  # [CLS] / [SEP] are never selected: a little under 30% of all real tokens.
  assert 0.26 < selected / real < 0.31, selected / real
  records = pretraining.train(tmp_path / "run", RECIPE, [
      f"build_model.config_overrides = {{{pretraining.TINY}}}"], steps=40)
  loss = pretraining.early_late(records, "mlm_loss")
  accuracy = pretraining.early_late(records, "mlm_accuracy")
  assert loss[1] < loss[0] - 0.2 and accuracy[1] > accuracy[0], (loss, accuracy)
