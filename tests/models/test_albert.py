"""ALBERT equals transformers' AlbertModel / AlbertForPreTraining, through from_hf / to_hf;
parameter sharing and parameter counts as in the paper."""
import jax
import numpy as np
import pytest
import torch
import transformers

import bertjax
from bertjax.models import albert, bert
from tests.helpers import hf as hf_helpers, pretraining as pretraining_helpers

ODD_CONFIG = dict(vocab_size=101, embedding_size=24, hidden_size=48, num_hidden_layers=3,
                  num_attention_heads=3, intermediate_size=37, max_position_embeddings=40,
                  type_vocab_size=3, hidden_act="gelu_new", hidden_dropout_prob=0.1,
                  attention_probs_dropout_prob=0.1)

ARCHITECTURES = {
    "AlbertModel": (transformers.AlbertModel, ("last_hidden_state", "pooler_output")),
    "AlbertForPreTraining": (transformers.AlbertForPreTraining, ("prediction_logits", "sop_logits")),
    "AlbertForMaskedLM": (transformers.AlbertForMaskedLM, ("logits",)),
}


def reference(architecture: str, tmp_path, seed: int = 0, **overrides):
  cls, _ = ARCHITECTURES[architecture]
  torch.manual_seed(seed)
  config = transformers.AlbertConfig(**{**ODD_CONFIG, **overrides})
  model = hf_helpers.redraw_weights(cls(config), seed)
  model.save_pretrained(tmp_path / architecture)
  return model, tmp_path / architecture


@pytest.mark.parametrize("architecture,groups", [("AlbertModel", 1), ("AlbertForPreTraining", 1),
                                                 ("AlbertForMaskedLM", 3)])
def test_matches_transformers_on_padded_batch(architecture, groups, tmp_path):
  torch_model, path = reference(architecture, tmp_path, num_hidden_groups=groups)
  ours = bertjax.from_hf(path)
  assert ours.architecture == architecture and ours.config.num_hidden_groups == groups
  inputs = hf_helpers.padded_batch(ODD_CONFIG["vocab_size"], type_vocab_size=3)
  expected = hf_helpers.torch_outputs(torch_model, inputs, output_hidden_states=True)
  got = ours(**inputs, output_hidden_states=True)
  keys = ARCHITECTURES[architecture][1] + ("hidden_states",)
  diffs = hf_helpers.max_abs_diff(got, expected, keys)
  assert max(diffs.values()) <= 1e-4, diffs
  assert np.std(got[keys[0]]) > 0.1


def test_layers_share_one_set_of_parameters(tmp_path):
  _, path = reference("AlbertModel", tmp_path)
  ours = bertjax.from_hf(path)
  query = ours.params["encoder"]["layers"]["attention"]["query"]["kernel"]
  assert query.shape == (48, 3, 16)  # no `layers` axis: one layer, applied 3 times
  assert ours.params["embeddings"]["word_embeddings"]["embedding"].shape == (101, 24)
  assert ours.params["embedding_projection"]["kernel"].shape == (24, 48)


def test_export_round_trip_loads_in_transformers(tmp_path):
  torch_model, path = reference("AlbertForPreTraining", tmp_path, seed=1)
  ours = bertjax.from_hf(path)
  bertjax.to_hf(ours, tmp_path / "exported")
  reloaded = transformers.AlbertForPreTraining.from_pretrained(tmp_path / "exported").eval()
  inputs = hf_helpers.padded_batch(ODD_CONFIG["vocab_size"], type_vocab_size=3, seed=5)
  keys = ("prediction_logits", "sop_logits")
  diffs = hf_helpers.max_abs_diff(hf_helpers.torch_outputs(reloaded, inputs),
                                  hf_helpers.torch_outputs(torch_model, inputs), keys)
  assert max(diffs.values()) <= 1e-5, diffs


def test_unsupported_group_layout_is_named():
  with pytest.raises(ValueError, match="num_hidden_groups=2"):
    albert.AlbertConfig(num_layers=4, num_hidden_groups=2)


def count(params) -> int:
  return sum(x.size for x in jax.tree_util.tree_leaves(params))


def reference_count(cls, hf_config) -> int:
  with torch.device("meta"):
    return sum(p.numel() for p in cls(hf_config).parameters())


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
  for ours_cls, hf_cls in ((albert.AlbertModel, transformers.AlbertModel),
                           (albert.AlbertForPreTraining, transformers.AlbertForPreTraining)):
    ours = count(jax.eval_shape(lambda: bert.init_params(ours_cls(cfg), jax.random.PRNGKey(0))))
    assert ours == reference_count(hf_cls, albert_hf_config(cfg)), ours_cls
  encoder = count(jax.eval_shape(lambda: bert.init_params(albert.AlbertModel(cfg),
                                                          jax.random.PRNGKey(0))))
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
