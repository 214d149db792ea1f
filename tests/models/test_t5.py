"""T5 (v1.0 and v1.1) equals transformers' PyTorch T5, through from_hf / to_hf."""
import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
import transformers
from transformers.models.t5.modeling_t5 import T5Attention

import bertjax
from bertjax.checkpoints import model as hf_model
from bertjax.hf import registry
from bertjax.models.t5 import relative as t5_relative
from bertjax.models import t5
from tests.helpers import hf as hf_helpers, parity
from tests.helpers import seq2seq as seq2seq_helpers
from tests.helpers.seq2seq import seq2seq_batch

# Odd sizes on purpose: heads * d_kv != d_model, fewer decoder than encoder layers,
# few buckets with a short max distance so the log buckets are exercised.
ODD_CONFIG = dict(vocab_size=91, d_model=24, d_kv=7, d_ff=37, num_layers=3, num_decoder_layers=2,
                  num_heads=3, relative_attention_num_buckets=10,
                  relative_attention_max_distance=20, dropout_rate=0.1)
VERSIONS = {"v1_0": {}, "v1_1": dict(feed_forward_proj="gated-gelu", tie_word_embeddings=False)}


def t5_case(model_class, outputs, version: str) -> parity.Case:
  return parity.Case(
      model_class, dict(ODD_CONFIG, **VERSIONS[version]),
      outputs + seq2seq_helpers.ENCODER_AND_HIDDEN_STATES,
      name=f"{model_class.__name__}-{version}", min_std=0.05,
      expect={"config.gated": version == "v1_1"},
      **seq2seq_helpers.parity_batches(ODD_CONFIG["vocab_size"]))


CASES = parity.table(*(case for version in sorted(VERSIONS) for case in (
    t5_case(transformers.T5ForConditionalGeneration, ("logits",), version),
    t5_case(transformers.T5Model, ("last_hidden_state",), version))))
test_matches_transformers_and_round_trips = parity.parametrized(CASES)


def generator(version: str) -> parity.Case:
  """The T5ForConditionalGeneration row of `version`."""
  return CASES[f"T5ForConditionalGeneration-{version}"]


def test_relative_buckets_equal_reference():
  relative = np.arange(-700, 700)
  for bidirectional in (True, False):
    for buckets, distance in ((32, 128), (10, 20), (7, 13)):
      theirs = T5Attention._relative_position_bucket(torch.tensor(relative), bidirectional,
                                                     buckets, distance).numpy()
      ours = t5_relative.relative_position_bucket(relative, bidirectional, buckets, distance)
      np.testing.assert_array_equal(np.asarray(ours), theirs)


def test_untied_v1_1_head_round_trips(tmp_path):
  """Our v1.1 keeps its own output projection; transformers loads it untied."""
  config = t5.T5Config(vocab_size=50, hidden_size=16, head_dim=4, intermediate_size=24,
                       num_layers=2, num_decoder_layers=2, num_heads=2, hidden_act="gelu_new",
                       gated=True, tie_word_embeddings=False, hidden_dropout=0.0)
  module = t5.T5ForConditionalGeneration(config)
  ids = jnp.ones((1, 6), jnp.int32)
  params = nn.unbox(jax.jit(module.init)(jax.random.PRNGKey(0), ids, ids)["params"])
  assert "lm_head" in params
  family = registry.family_for("t5")
  model = hf_model.HFModel(family, "T5ForConditionalGeneration", config, module, params)
  bertjax.to_hf(model, tmp_path / "untied")
  reloaded = transformers.T5ForConditionalGeneration.from_pretrained(tmp_path / "untied").eval()
  assert reloaded.lm_head.weight.data_ptr() != reloaded.shared.weight.data_ptr()
  inputs = seq2seq_batch(50, seed=3)
  diffs = hf_helpers.max_abs_diff(model(**inputs), hf_helpers.torch_outputs(reloaded, inputs),
                                  ("logits",))
  assert diffs["logits"] <= 1e-4, diffs


def test_packed_rows_equal_separate_examples(tmp_path):
  """Two examples packed in one row (segment ids) give the logits they give alone."""
  _, path = parity.save_reference(generator("v1_1"), tmp_path)
  ours = bertjax.from_hf(path)
  rng = np.random.default_rng(0)
  enc = [rng.integers(2, 90, n) for n in (5, 4)]
  dec = [rng.integers(2, 90, n) for n in (3, 4)]
  apply = jax.jit(ours.module.apply)
  alone = [apply({"params": ours.params}, e[None], d[None])["logits"][0]
           for e, d in zip(enc, dec)]
  seg = lambda parts: np.concatenate([np.full(len(p), i + 1) for i, p in enumerate(parts)])[None]
  packed = apply(
      {"params": ours.params}, np.concatenate(enc)[None], np.concatenate(dec)[None],
      encoder_segment_ids=seg(enc), decoder_segment_ids=seg(dec))["logits"][0]
  # Relative positions differ across the boundary only for masked pairs; within an
  # example the offsets are unchanged, so the bias terms match.
  np.testing.assert_allclose(packed[:3], alone[0], atol=1e-5)
  np.testing.assert_allclose(packed[3:], alone[1], atol=1e-5)


def test_dropout_uses_explicit_rng(tmp_path):
  _, path = parity.save_reference(generator("v1_0"), tmp_path)
  ours = bertjax.from_hf(path)
  inputs = seq2seq_batch(ODD_CONFIG["vocab_size"])
  run = jax.jit(lambda key: ours.module.apply(
      {"params": ours.params}, inputs["input_ids"], inputs["decoder_input_ids"],
      deterministic=False, rngs={"dropout": key})["logits"])
  a, b, c = run(jax.random.PRNGKey(0)), run(jax.random.PRNGKey(0)), run(jax.random.PRNGKey(1))
  np.testing.assert_array_equal(a, b)
  assert np.abs(np.asarray(a) - np.asarray(c)).max() > 1e-3


@pytest.mark.parametrize("size", ["small", "v1_1_small", "base"])
def test_parameter_counts_equal_reference(size):
  cfg = t5.SIZES[size]()
  module = t5.T5ForConditionalGeneration(cfg)
  ids = jnp.zeros((1, 4), jnp.int32)
  ours = hf_helpers.parameter_count(lambda: module.init(jax.random.PRNGKey(0), ids, ids)["params"])
  projection = "gated-gelu" if cfg.gated else "relu"
  hf_config = transformers.T5Config(
      vocab_size=cfg.vocab_size, d_model=cfg.hidden_size, d_kv=cfg.head_dim,
      d_ff=cfg.intermediate_size, num_layers=cfg.num_layers, num_heads=cfg.num_heads,
      feed_forward_proj=projection)
  # The tied lm_head counted once.
  theirs = hf_helpers.reference_parameter_count(transformers.T5ForConditionalGeneration,
                                                hf_config)
  untied_head = 0 if cfg.tie_word_embeddings else cfg.vocab_size * cfg.hidden_size
  assert ours == theirs + untied_head


@pytest.mark.parametrize("version,prompt_length", [("v1_0", 1), ("v1_0", 3), ("v1_1", 1)])
def test_cached_decoding_equals_full_decoding(version, prompt_length, tmp_path):
  # Decoding runs past the relative-bias max distance (20) so far buckets are used too.
  seq2seq_helpers.assert_cached_decoding_equals_full(generator(version), tmp_path, prompt_length,
                                                     decoder_length=26)


@pytest.mark.parametrize("settings", [dict(num_beams=1), dict(num_beams=3, length_penalty=0.7)])
def test_generate_equals_reference_generate(settings, tmp_path):
  seq2seq_helpers.assert_generate_equals_reference(generator("v1_1"), tmp_path, **settings)
