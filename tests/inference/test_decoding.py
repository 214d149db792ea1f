"""bertjax.inference.decoding: the key/value cache against full recomputation, and sampling."""
import hypothesis
import hypothesis.strategies as st
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bertjax.inference import decoding, runners, search
from bertjax.models import gpt

CONFIG = gpt.GPTConfig(vocab_size=61, hidden_size=16, num_layers=2, num_heads=2,
                       intermediate_size=32, max_position_embeddings=32, bos_token_id=None,
                       eos_token_id=None)


@pytest.fixture(scope="module")
def lm():
  module = gpt.GPTLMHeadModel(CONFIG)
  params = jax.jit(module.init)(jax.random.PRNGKey(0), jnp.zeros((1, 4), jnp.int32))["params"]
  # Larger weights than the initializer's, so that every position's logits differ.
  params = jax.tree.map(lambda p: p * 8.0 if p.ndim > 1 else p, params)
  return module, params


def _left_padded(batch=3, length=9, seed=0):
  rng = np.random.default_rng(seed)
  ids = rng.integers(1, CONFIG.vocab_size, (batch, length)).astype(np.int32)
  mask = np.ones_like(ids)
  mask[1, :3] = 0
  return np.where(mask == 1, ids, 0), mask


@pytest.mark.parametrize("prefill", [1, 4])
def test_cached_steps_equal_full_sequence(lm, prefill):
  """Prefill `prefill` tokens, then feed one token at a time: every step's logits equal
  the full (uncached) forward's logits at that position."""
  module, params = lm
  ids, mask = _left_padded()
  length = ids.shape[1]
  positions = np.maximum(np.cumsum(mask, axis=1) - 1, 0)
  full = module.apply({"params": params}, ids, attention_mask=mask,
                      position_ids=positions)["logits"]
  cache = runners.init_cache(module.apply, {"params": params}, ids, attention_mask=mask,
                              position_ids=positions, decode=True)
  assert all(not np.any(x) for x in jax.tree.leaves(cache))
  step = jax.jit(lambda cache, tokens, pos: module.apply(
      {"params": params, "cache": cache}, tokens, attention_mask=mask, position_ids=pos,
      decode=True, mutable=["cache"]))
  steps = []
  for start, stop in [(0, prefill)] + [(t, t + 1) for t in range(prefill, length)]:
    out, variables = step(cache, ids[:, start:stop], positions[:, start:stop])
    cache = variables["cache"]
    steps.append(out["logits"])
  cached = np.concatenate(steps, axis=1)
  real = mask.astype(bool)
  assert np.abs(np.where(real[..., None], cached - full, 0)).max() <= 1e-5


def test_cache_batch_axes_of_a_scanned_stack(lm):
  module, params = lm

  def make(batch):
    tokens = jnp.zeros((batch, 8), jnp.int32)
    return runners.init_cache(module.apply, {"params": params}, tokens, attention_mask=tokens,
                               position_ids=tokens, decode=True)
  axes = runners.cache_batch_axes(make)
  layers = axes["transformer"]["decoder"]["layers"]["attention"]
  assert layers == {"cached_key": 1, "cached_value": 1, "cache_index": -1}


@pytest.mark.parametrize("settings", [dict(), dict(num_beams=3, length_penalty=0.0)])
def test_generate_cached_equals_uncached(lm, settings):
  module, params = lm
  ids, mask = _left_padded(seed=1)
  kwargs = dict(max_new_tokens=6, eos_token_id=3, pad_token_id=0, **settings)
  cached = decoding.generate(module, params, ids, mask, **kwargs)
  uncached = decoding.generate(module, params, ids, mask, use_cache=False, **kwargs)
  np.testing.assert_array_equal(cached, uncached)
  np.testing.assert_array_equal(cached[:, :ids.shape[1]], ids)


def test_sampling_is_a_function_of_the_key_and_respects_top_k(lm):
  module, params = lm
  ids, mask = _left_padded(seed=2)
  kwargs = dict(max_new_tokens=8, do_sample=True, top_k=3, temperature=0.7)
  first = decoding.generate(module, params, ids, mask, prng_key=jax.random.PRNGKey(7), **kwargs)
  again = decoding.generate(module, params, ids, mask, prng_key=jax.random.PRNGKey(7), **kwargs)
  other = decoding.generate(module, params, ids, mask, prng_key=jax.random.PRNGKey(8), **kwargs)
  np.testing.assert_array_equal(first, again)
  assert not np.array_equal(first, other)
  # Every sampled token is among the top 3 of the model's next-token logits.
  full_mask = np.concatenate([mask, np.ones((3, 8), np.int32)], axis=1)
  logits = module.apply({"params": params}, first, attention_mask=full_mask,
                        position_ids=np.maximum(np.cumsum(full_mask, 1) - 1, 0))["logits"]
  prompt = ids.shape[1]
  for t in range(prompt, first.shape[1]):
    top3 = np.argsort(-np.asarray(logits[:, t - 1]), axis=-1)[:, :3]
    assert all(first[b, t] in top3[b] for b in range(3))


def test_top_k_1_sampling_is_greedy(lm):
  module, params = lm
  ids, mask = _left_padded(seed=3)
  greedy = decoding.generate(module, params, ids, mask, max_new_tokens=5)
  sampled = decoding.generate(module, params, ids, mask, max_new_tokens=5, do_sample=True,
                              top_k=1, prng_key=jax.random.PRNGKey(3))
  np.testing.assert_array_equal(greedy, sampled)


@hypothesis.settings(max_examples=25, deadline=None)
@hypothesis.given(seed=st.integers(0, 2**31 - 1), top_k=st.integers(1, 12),
                  top_p=st.floats(0.05, 0.99), temperature=st.floats(0.3, 3.0))
def test_warp_excludes_exactly_the_filtered_tokens(seed, top_k, top_p, temperature):
  rng = np.random.default_rng(seed)
  logits = jnp.asarray(rng.normal(size=(4, 12)) * 3, jnp.float32)
  warped = np.asarray(search.warp(logits, temperature, top_k, top_p))
  scaled = np.asarray(logits) / temperature
  for row, kept_scores in zip(scaled, warped):
    kept = np.isfinite(kept_scores)
    np.testing.assert_allclose(kept_scores[kept], row[kept], rtol=1e-6)
    order = np.argsort(-row)
    # top-k: nothing outside the k best survives.
    assert not kept[order[top_k:]].any() or np.isclose(row[order[top_k - 1]],
                                                       row[order[top_k:]]).any()
    # top-p over the top-k survivors: the kept set is the smallest prefix reaching top_p.
    survivors = order[:top_k]
    probs = np.exp(row[survivors] - row[survivors].max())
    probs /= probs.sum()
    needed = int(np.searchsorted(np.cumsum(probs), top_p - 1e-6) + 1)
    assert kept.sum() in (needed, needed + 1) and kept[survivors[0]]
    # Samples never land on an excluded token.
    keys = jax.random.split(jax.random.PRNGKey(seed % 1000), 64)
    samples = np.asarray(jax.vmap(lambda k, s=kept_scores: jax.random.categorical(k, s))(keys))
    assert kept[samples].all()


def test_generation_config_reads_model_ids_and_rejects_unknown_arguments():
  cfg = decoding.generation_config(CONFIG.replace(eos_token_id=4), max_new_tokens=3)
  assert cfg.eos_token_id == 4 and cfg.top_k == 50
  with pytest.raises(ValueError, match="Unknown generate"):
    decoding.generation_config(None, beams=2)
  with pytest.raises(ValueError, match="num_return_sequences"):
    decoding.generation_config(None, num_beams=2, num_return_sequences=3)
