"""BERT equals transformers' PyTorch BERT, through from_hf / to_hf."""
import json

import jax
import numpy as np
import pytest
import torch
import transformers

import bertjax
from bertjax.models import bert
from tests.helpers import hf as hf_helpers

ODD_CONFIG = dict(vocab_size=101, hidden_size=48, num_hidden_layers=3, num_attention_heads=3,
                  intermediate_size=37, max_position_embeddings=40, type_vocab_size=3,
                  hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1)

ARCHITECTURES = {
    "BertModel": (transformers.BertModel, ("last_hidden_state", "pooler_output")),
    "BertForPreTraining": (transformers.BertForPreTraining,
                           ("prediction_logits", "seq_relationship_logits")),
    "BertForMaskedLM": (transformers.BertForMaskedLM, ("logits",)),
}


def reference(architecture: str, tmp_path, seed: int = 0):
  cls, _ = ARCHITECTURES[architecture]
  torch.manual_seed(seed)
  model = hf_helpers.redraw_weights(cls(transformers.BertConfig(**ODD_CONFIG)), seed)
  model.save_pretrained(tmp_path / architecture)
  return model, tmp_path / architecture


@pytest.mark.parametrize("architecture", sorted(ARCHITECTURES))
def test_matches_transformers_on_padded_batch(architecture, tmp_path):
  torch_model, path = reference(architecture, tmp_path)
  ours = bertjax.from_hf(path)
  assert ours.architecture == architecture
  inputs = hf_helpers.padded_batch(ODD_CONFIG["vocab_size"], type_vocab_size=3)
  expected = hf_helpers.torch_outputs(torch_model, inputs, output_hidden_states=True)
  got = ours(**inputs, output_hidden_states=True)
  keys = ARCHITECTURES[architecture][1] + ("hidden_states",)
  diffs = hf_helpers.max_abs_diff(got, expected, keys)
  assert max(diffs.values()) <= 1e-4, diffs
  # The check is not vacuous: outputs vary strongly across tokens.
  assert np.std(got[keys[0]]) > 0.1


@pytest.mark.parametrize("architecture", ["BertForPreTraining", "BertModel"])
def test_export_round_trip_loads_in_transformers(architecture, tmp_path):
  torch_model, path = reference(architecture, tmp_path, seed=1)
  ours = bertjax.from_hf(path)
  bertjax.to_hf(ours, tmp_path / "exported")
  reloaded = ARCHITECTURES[architecture][0].from_pretrained(tmp_path / "exported").eval()
  inputs = hf_helpers.padded_batch(ODD_CONFIG["vocab_size"], type_vocab_size=3, seed=5)
  keys = ARCHITECTURES[architecture][1]
  diffs = hf_helpers.max_abs_diff(hf_helpers.torch_outputs(reloaded, inputs),
                                  hf_helpers.torch_outputs(torch_model, inputs), keys)
  assert max(diffs.values()) <= 1e-5, diffs
  # And our reloaded copy has the same parameters.
  again = bertjax.from_hf(tmp_path / "exported")
  same = jax.tree_util.tree_map(lambda a, b: bool(np.array_equal(a, b)), ours.params, again.params)
  assert all(jax.tree_util.tree_leaves(same))


def test_dropout_uses_explicit_rng(tmp_path):
  _, path = reference("BertForMaskedLM", tmp_path)
  ours = bertjax.from_hf(path)
  ids = hf_helpers.padded_batch(ODD_CONFIG["vocab_size"])["input_ids"]
  run = lambda key: ours.module.apply({"params": ours.params}, ids, deterministic=False,
                                      rngs={"dropout": key})["logits"]
  a, b, c = run(jax.random.PRNGKey(0)), run(jax.random.PRNGKey(0)), run(jax.random.PRNGKey(1))
  np.testing.assert_array_equal(a, b)
  assert np.abs(np.asarray(a) - np.asarray(c)).max() > 1e-3


def test_missing_config_is_named(tmp_path):
  with pytest.raises(FileNotFoundError, match="config.json"):
    bertjax.from_hf(tmp_path)


def test_unsupported_model_type_lists_supported(tmp_path):
  (tmp_path / "config.json").write_text(json.dumps({"model_type": "mystery"}))
  with pytest.raises(ValueError, match=r"'mystery' is not supported.*'bert'"):
    bertjax.from_hf(tmp_path)


def test_unsupported_architecture_is_named(tmp_path):
  _, path = reference("BertModel", tmp_path)
  config = json.loads((path / "config.json").read_text())
  config["architectures"] = ["BertForQuantumChemistry"]
  (path / "config.json").write_text(json.dumps(config))
  with pytest.raises(ValueError, match="BertForQuantumChemistry.*supported"):
    bertjax.from_hf(path)


def test_shape_mismatch_names_tensor_and_shapes(tmp_path):
  _, path = reference("BertModel", tmp_path)
  config = json.loads((path / "config.json").read_text())
  config["intermediate_size"] = 64
  (path / "config.json").write_text(json.dumps(config))
  with pytest.raises(ValueError, match=r"intermediate\.dense\.weight.*\(37, 48\).*\(64, 48\)"):
    bertjax.from_hf(path)


def test_missing_weights_file_is_named(tmp_path):
  _, path = reference("BertModel", tmp_path)
  (path / "model.safetensors").unlink()
  with pytest.raises(FileNotFoundError, match="model.safetensors"):
    bertjax.from_hf(path)


@pytest.mark.parametrize("size", sorted(bert.SIZES))
def test_parameter_counts_equal_reference(size):
  cfg = bert.SIZES[size]()
  ours = jax.eval_shape(lambda: bert.init_params(bert.BertForPreTraining(cfg), jax.random.PRNGKey(0)))
  ours_count = sum(x.size for x in jax.tree_util.tree_leaves(ours))
  hf_config = transformers.BertConfig(
      hidden_size=cfg.hidden_size, num_hidden_layers=cfg.num_layers,
      num_attention_heads=cfg.num_heads, intermediate_size=cfg.intermediate_size)
  with torch.device("meta"):
    reference_model = transformers.BertForPreTraining(hf_config)
  # Tied decoder weight/bias are shared tensors, counted once, as parameters() does.
  assert ours_count == sum(p.numel() for p in reference_model.parameters())
