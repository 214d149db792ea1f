"""BART equals transformers' PyTorch BART, through from_hf / to_hf."""
import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
import transformers

import bertjax
from bertjax.models import bart
from tests.helpers import hf as hf_helpers
from tests.helpers import seq2seq as seq2seq_helpers

ODD_CONFIG = dict(vocab_size=93, d_model=24, encoder_layers=3, decoder_layers=2,
                  encoder_attention_heads=3, decoder_attention_heads=2, encoder_ffn_dim=37,
                  decoder_ffn_dim=29, max_position_embeddings=30, dropout=0.1,
                  attention_dropout=0.1, activation_dropout=0.1)
ARCHITECTURES = {
    "BartForConditionalGeneration": (transformers.BartForConditionalGeneration,
                                     ("logits", "encoder_last_hidden_state")),
    "BartModel": (transformers.BartModel, ("last_hidden_state", "encoder_last_hidden_state")),
}


def reference(architecture: str, tmp_path, seed: int = 0, **overrides):
  cls, _ = ARCHITECTURES[architecture]
  torch.manual_seed(seed)
  model = hf_helpers.redraw_weights(cls(transformers.BartConfig(**ODD_CONFIG, **overrides)), seed)
  if hasattr(model, "final_logits_bias"):  # a buffer, so redraw_weights leaves it at zero
    with torch.no_grad():
      model.final_logits_bias.normal_(generator=torch.Generator().manual_seed(seed))
  path = tmp_path / architecture
  model.save_pretrained(path)
  return model, path


def seq2seq_batch(vocab_size: int, seed: int = 0) -> dict:
  enc = hf_helpers.padded_batch(vocab_size, lengths=(11, 7, 3), seed=seed)
  dec = hf_helpers.padded_batch(vocab_size, lengths=(5, 9, 2), seed=seed + 1)
  return {"input_ids": enc["input_ids"], "attention_mask": enc["attention_mask"],
          "decoder_input_ids": dec["input_ids"], "decoder_attention_mask": dec["attention_mask"]}


@pytest.mark.parametrize("scale_embedding", [False, True])
@pytest.mark.parametrize("architecture", sorted(ARCHITECTURES))
def test_matches_transformers_on_padded_batch(architecture, scale_embedding, tmp_path):
  torch_model, path = reference(architecture, tmp_path, scale_embedding=scale_embedding)
  ours = bertjax.from_hf(path)
  assert ours.config.scale_embedding == scale_embedding
  inputs = seq2seq_batch(ODD_CONFIG["vocab_size"])
  expected = hf_helpers.torch_outputs(torch_model, inputs, output_hidden_states=True)
  got = ours(**inputs, output_hidden_states=True)
  keys = ARCHITECTURES[architecture][1] + ("encoder_hidden_states", "decoder_hidden_states")
  diffs = hf_helpers.max_abs_diff(got, expected, keys)
  assert max(diffs.values()) <= 1e-4, diffs
  assert np.std(got[keys[0]]) > 0.1


def test_export_round_trip_loads_in_transformers(tmp_path):
  torch_model, path = reference("BartForConditionalGeneration", tmp_path, seed=1)
  ours = bertjax.from_hf(path)
  bertjax.to_hf(ours, tmp_path / "exported")
  reloaded = transformers.BartForConditionalGeneration.from_pretrained(tmp_path / "exported")
  inputs = seq2seq_batch(ODD_CONFIG["vocab_size"], seed=5)
  diffs = hf_helpers.max_abs_diff(hf_helpers.torch_outputs(reloaded.eval(), inputs),
                                  hf_helpers.torch_outputs(torch_model, inputs), ("logits",))
  assert diffs["logits"] <= 1e-5, diffs
  again = bertjax.from_hf(tmp_path / "exported")
  same = jax.tree_util.tree_map(lambda a, b: bool(np.array_equal(a, b)), ours.params, again.params)
  assert all(jax.tree_util.tree_leaves(same))


def test_packed_rows_equal_separate_examples(tmp_path):
  """Packed examples (segment ids, restarting position ids) give their unpacked logits."""
  _, path = reference("BartForConditionalGeneration", tmp_path)
  ours = bertjax.from_hf(path)
  rng = np.random.default_rng(0)
  enc = [rng.integers(3, 90, n) for n in (5, 4)]
  dec = [rng.integers(3, 90, n) for n in (3, 4)]
  apply = jax.jit(ours.module.apply)
  alone = [apply({"params": ours.params}, e[None], d[None])["logits"][0] for e, d in zip(enc, dec)]
  seg = lambda parts: np.concatenate([np.full(len(p), i + 1) for i, p in enumerate(parts)])[None]
  pos = lambda parts: np.concatenate([np.arange(len(p)) for p in parts])[None]
  packed = apply({"params": ours.params}, np.concatenate(enc)[None], np.concatenate(dec)[None],
                 encoder_segment_ids=seg(enc), decoder_segment_ids=seg(dec),
                 encoder_position_ids=pos(enc), decoder_position_ids=pos(dec))["logits"][0]
  np.testing.assert_allclose(packed[:3], alone[0], atol=1e-5)
  np.testing.assert_allclose(packed[3:], alone[1], atol=1e-5)


def test_pre_norm_configs_are_refused(tmp_path):
  _, path = reference("BartModel", tmp_path)
  config = (path / "config.json").read_text().replace('"model_type"', '"normalize_before": true, "model_type"')
  (path / "config.json").write_text(config)
  with pytest.raises(ValueError, match="post-norm"):
    bertjax.from_hf(path)


@pytest.mark.parametrize("size", sorted(bart.SIZES))
def test_parameter_counts_equal_reference(size):
  cfg = bart.SIZES[size]()
  module = bart.BartForConditionalGeneration(cfg)
  ids = jnp.zeros((1, 4), jnp.int32)
  shapes = jax.eval_shape(lambda: module.init(jax.random.PRNGKey(0), ids, ids)["params"])
  ours = sum(x.size for x in jax.tree_util.tree_leaves(nn.unbox(shapes)))
  hf_config = transformers.BartConfig(
      d_model=cfg.hidden_size, encoder_layers=cfg.encoder_layers,
      decoder_layers=cfg.decoder_layers, encoder_attention_heads=cfg.encoder_heads,
      decoder_attention_heads=cfg.decoder_heads, encoder_ffn_dim=cfg.encoder_ffn_size,
      decoder_ffn_dim=cfg.decoder_ffn_size)
  with torch.device("meta"):
    reference_model = transformers.BartForConditionalGeneration(hf_config)
  # final_logits_bias is a buffer there and a parameter here.
  theirs = sum(p.numel() for p in reference_model.parameters()) + cfg.vocab_size
  assert ours == theirs


@pytest.mark.parametrize("prompt_length", [1, 3])
def test_cached_decoding_equals_full_decoding(prompt_length, tmp_path):
  _, path = reference("BartForConditionalGeneration", tmp_path)
  ours = bertjax.from_hf(path)
  inputs = seq2seq_batch(ODD_CONFIG["vocab_size"])
  decoder_ids = np.random.default_rng(0).integers(0, ODD_CONFIG["vocab_size"], (3, 12))
  full, cached = seq2seq_helpers.cached_vs_full_logits(
      ours.module, ours.params, inputs["input_ids"], inputs["attention_mask"], decoder_ids,
      prompt_length)
  np.testing.assert_allclose(cached, full, rtol=0, atol=1e-5)


@pytest.mark.parametrize("settings", [dict(num_beams=1), dict(num_beams=3, length_penalty=0.7)])
def test_generate_equals_reference_generate(settings, tmp_path):
  torch_model, path = reference("BartForConditionalGeneration", tmp_path)
  ours = bertjax.from_hf(path)
  inputs = seq2seq_batch(ODD_CONFIG["vocab_size"], seed=2)
  expected, got = seq2seq_helpers.generate_both(
      torch_model, ours, inputs["input_ids"], inputs["attention_mask"], max_new_tokens=8,
      **settings)
  np.testing.assert_array_equal(got, expected)
