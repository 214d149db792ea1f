"""Longformer equals transformers' LongformerForMaskedLM / LongformerModel (per-layer
windows, global attention on chosen tokens, padding, random weights), through from_hf /
to_hf."""
import numpy as np
import torch
import transformers

import bertjax
from bertjax.models import longformer
from tests.helpers import hf as hf_helpers

PAD = 1
# Windows 4 and 8 (w = 2 and 4 per side); the reference pads to a multiple of 8.
ODD_CONFIG = dict(vocab_size=101, hidden_size=48, num_hidden_layers=2, num_attention_heads=4,
                  intermediate_size=37, max_position_embeddings=80, attention_window=[4, 8],
                  pad_token_id=PAD, type_vocab_size=1, hidden_act="gelu_new")


def reference(cls, tmp_path, seed: int = 0):
  torch.manual_seed(seed)
  model = hf_helpers.redraw_weights(cls(transformers.LongformerConfig(**ODD_CONFIG)), seed)
  model.save_pretrained(tmp_path / cls.__name__)
  return model, tmp_path / cls.__name__


def batch(lengths=(40, 23, 31), seed: int = 0, global_rows=True):
  inputs = hf_helpers.padded_batch(101, lengths=lengths, type_vocab_size=1, seed=seed, first_id=2)
  inputs["input_ids"] = np.where(inputs["attention_mask"] == 1, inputs["input_ids"], PAD)
  if global_rows:  # [CLS] everywhere, a "question" in row 0, one late token in row 2
    glob = np.zeros_like(inputs["input_ids"])
    glob[:, 0] = 1
    glob[0, 5:8] = 1
    glob[-1, lengths[-1] - 1] = 1
    inputs["global_attention_mask"] = glob
  return inputs


def test_masked_lm_matches_transformers(tmp_path):
  torch_model, path = reference(transformers.LongformerForMaskedLM, tmp_path)
  ours = bertjax.from_hf(path)
  assert ours.config.attention.window == (2, 4)
  for inputs in (batch(), batch(global_rows=False)):
    expected = hf_helpers.torch_outputs(torch_model, inputs, output_hidden_states=True)
    got = ours(**inputs, output_hidden_states=True)
    diffs = hf_helpers.max_abs_diff(got, expected, ("logits", "hidden_states"))
    assert max(diffs.values()) <= 1e-4, diffs
    assert np.std(got["logits"]) > 0.1


def test_model_with_pooler_matches_transformers(tmp_path):
  torch_model, path = reference(transformers.LongformerModel, tmp_path, seed=1)
  ours = bertjax.from_hf(path)
  inputs = batch(lengths=(37, 29), seed=1)  # padded inside to 40
  expected = hf_helpers.torch_outputs(torch_model, inputs)
  diffs = hf_helpers.max_abs_diff(ours(**inputs), expected, ("last_hidden_state", "pooler_output"))
  assert max(diffs.values()) <= 1e-4, diffs


def test_export_round_trip_loads_in_transformers(tmp_path):
  torch_model, path = reference(transformers.LongformerForMaskedLM, tmp_path, seed=2)
  bertjax.to_hf(bertjax.from_hf(path), tmp_path / "exported")
  reloaded = transformers.LongformerForMaskedLM.from_pretrained(tmp_path / "exported").eval()
  assert list(reloaded.config.attention_window) == [4, 8]
  inputs = batch(seed=3)
  diffs = hf_helpers.max_abs_diff(hf_helpers.torch_outputs(reloaded, inputs),
                                  hf_helpers.torch_outputs(torch_model, inputs), ("logits",))
  assert max(diffs.values()) <= 1e-5, diffs


def test_sizes():
  cfg = longformer.longformer_base()
  assert (cfg.num_layers, cfg.hidden_size, cfg.attention.window) == (12, 768, 256)
  assert cfg.max_position_embeddings == 4098 and cfg.attention.global_tokens == ()
