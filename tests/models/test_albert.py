"""ALBERT equals transformers' AlbertModel / AlbertForPreTraining, through from_hf / to_hf;
parameter sharing and parameter counts as in the paper."""
import jax
import pytest
import transformers

import bertjax
from bertjax.models import albert, bert
from tests.helpers import hf as hf_helpers, parity, pretraining as pretraining_helpers

ODD_CONFIG = dict(vocab_size=101, embedding_size=24, hidden_size=48, num_hidden_layers=3,
                  num_attention_heads=3, intermediate_size=37, max_position_embeddings=40,
                  type_vocab_size=3, hidden_act="gelu_new", hidden_dropout_prob=0.1,
                  attention_probs_dropout_prob=0.1)


def albert_case(model_class, outputs, groups: int = 1, **kwargs) -> parity.Case:
  """A row with `groups` layer groups (1: all layers share one set of parameters)."""
  return parity.Case(model_class, dict(ODD_CONFIG, num_hidden_groups=groups),
                     outputs + ("hidden_states",), expect={"config.num_hidden_groups": groups},
                     **parity.encoder_batches(ODD_CONFIG["vocab_size"], type_vocab_size=3),
                     **kwargs)


CASES = parity.table(
    albert_case(transformers.AlbertModel, ("last_hidden_state", "pooler_output")),
    albert_case(transformers.AlbertForPreTraining, ("prediction_logits", "sop_logits")),
    albert_case(transformers.AlbertForMaskedLM, ("logits",), groups=3,
                name="AlbertForMaskedLM-3_groups"),
    # Shared layers; the classifier's dropout is ALBERT's own classifier_dropout_prob.
    *parity.task_cases("Albert", dict(ODD_CONFIG, classifier_dropout_prob=0.2),
                       parity.encoder_batches(ODD_CONFIG["vocab_size"], type_vocab_size=3),
                       parity.choice_batches(ODD_CONFIG["vocab_size"], type_vocab_size=3),
                       expect={"config.classifier_dropout": 0.2},
                       expect_exported={"classifier_dropout_prob": 0.2}),
)
test_matches_transformers_and_round_trips = parity.parametrized(CASES)


def test_layers_share_one_set_of_parameters(tmp_path):
  _, path = parity.save_reference(CASES["AlbertModel"], tmp_path)
  ours = bertjax.from_hf(path)
  query = ours.params["encoder"]["layers"]["attention"]["query"]["kernel"]
  assert query.shape == (48, 3, 16)  # no `layers` axis: one layer, applied 3 times
  assert ours.params["embeddings"]["word_embeddings"]["embedding"].shape == (101, 24)
  assert ours.params["embedding_projection"]["kernel"].shape == (24, 48)


def test_unsupported_group_layout_is_named():
  with pytest.raises(ValueError, match="num_hidden_groups=2"):
    albert.AlbertConfig(num_layers=4, num_hidden_groups=2)


def albert_hf_config(cfg: albert.AlbertConfig) -> transformers.AlbertConfig:
  return transformers.AlbertConfig(
      embedding_size=cfg.embedding_size, hidden_size=cfg.hidden_size,
      num_hidden_layers=cfg.num_layers, num_attention_heads=cfg.num_heads,
      intermediate_size=cfg.intermediate_size)


# ALBERT paper, Table 1 (millions of parameters of the encoder). The paper rounds loosely:
# transformers' own counts (which ours equal exactly) are 11.7M, 17.7M, 58.7M and 222.6M.
PAPER_MILLIONS = {"base": 12, "large": 18, "xlarge": 60, "xxlarge": 235}


@pytest.mark.parametrize("size", sorted(albert.SIZES))
def test_parameter_counts_equal_reference_and_paper(size):
  cfg = albert.SIZES[size]()
  count = lambda module: hf_helpers.parameter_count(
      lambda: bert.init_params(module, jax.random.PRNGKey(0)))
  for ours_cls, hf_cls in ((albert.AlbertModel, transformers.AlbertModel),
                           (albert.AlbertForPreTraining, transformers.AlbertForPreTraining)):
    ours = count(ours_cls(cfg))
    assert ours == hf_helpers.reference_parameter_count(hf_cls, albert_hf_config(cfg)), ours_cls
  encoder = count(albert.AlbertModel(cfg))
  assert abs(encoder / 1e6 - PAPER_MILLIONS[size]) / PAPER_MILLIONS[size] < 0.06


@pytest.mark.slow
def test_trains_under_its_gin_recipe(tmp_path):
  """runs/albert_pretrain.gin (LAMB) + models/albert_base.gin + objectives/albert_mlm_sop.gin
  on the embedded corpus, shrunk to a tiny shared-layer model."""
  records = pretraining_helpers.train(
      tmp_path, ["runs/albert_pretrain.gin", "models/albert_base.gin",
                 "objectives/albert_mlm_sop.gin"],
      [f"build_model.config_overrides = {{{pretraining_helpers.TINY}, 'embedding_size': 16}}",
       # LAMB scales steps by the weights' norm, tiny at init: a larger rate for 40 steps.
       "warmup_linear_decay.peak_value = 0.02"])
  assert "make_optimizer.optimizer = @lamb" in (tmp_path / "operative_config.gin").read_text()
  assert all("sop_accuracy" in r for r in records)
  loss = pretraining_helpers.early_late(records, "mlm_loss")
  accuracy = pretraining_helpers.early_late(records, "mlm_accuracy")
  assert loss[1] < loss[0] - 0.2 and accuracy[1] > accuracy[0], (loss, accuracy)
