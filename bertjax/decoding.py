"""Incremental decoding with a key/value cache: greedy, beam search and sampling.

The cache protocol (what a model implements to be decoded here)
---------------------------------------------------------------
* Self-attention that should be cached is `MultiHeadAttention(..., decode=True)`
  (bertjax.layers.kv_cache): it keeps `cached_key`, `cached_value` [B, cache_length,
  heads, kv] and `cache_index` in the 'cache' collection, writes the new tokens' keys and
  values at `cache_index` and masks the slots not filled yet / in a query's future.
  `mask` / `bias` given to it then span the cache: [..., q, cache_length]. Layers stacked
  with `nn.scan` add `"cache": 0` to `variable_axes`. Cross-attention is not cached.
* A module that needs the absolute position of the new tokens (learned positions, T5's
  relative bias for query positions start..start+q against all cache slots) calls
  `kv_cache.step_positions(self, q)` -> (start, cache_length) once per step.
* The cache is created by one call with `decode=True` on a full-length input
  ([B, cache_length]); that call writes nothing. `init_cache` below does it abstractly
  (jax.eval_shape) and returns zeros, so creating a cache costs no compute.
* Decoder-only models (GPT): `module.apply({'params', 'cache'}, input_ids,
  attention_mask=..., position_ids=..., decode=True, mutable=['cache'])` returns
  `{'logits': [B, q, vocab], ...}`. In decode mode `attention_mask` is [B, cache_length]
  (1 = slot holds a real token: left padding of the prompt is 0) and `position_ids` are
  the new tokens' positions [B, q]. The prompt is written in one call (prefill), then
  one token per call.
* Encoder-decoders (T5, BART): `method='encode'`: `encode(input_ids, attention_mask)` ->
  `{'encoder_last_hidden_state': [B, S, H], ...}`; `method='decode'`:
  `decode(decoder_input_ids, encoder_hidden_states, attention_mask, decode=True)` ->
  `{'logits': [B, q, vocab], ...}` (attention_mask is the encoder's padding mask). With
  `decode=False` the same method is the full causal decoder (the uncached path).
* Beam search reorders every cache array along its batch axis, found by comparing the
  cache's shapes at two batch sizes; scalars such as `cache_index` are shared by all
  beams (they advance in lock step).

The generation loops (`generate`) are `lax.while_loop`s over a fixed-size token buffer
[B, prompt + max_new_tokens], jit-compiled once per shape and setting, stopping early
when every sequence (every beam hypothesis set) is done. They follow transformers'
`generate` step for step, so that greedy and beam search return the same token ids.
"""
from typing import Any, Callable

import jax
import jax.numpy as jnp

Cache = Any


def init_cache(apply_fn: Callable[..., Any], *args, **kwargs) -> Cache:
  """An empty cache: `apply_fn(*args, mutable=['cache'], **kwargs)` (a `decode=True`
  call on full-length inputs) is run abstractly and its 'cache' collection returned as
  zeros."""
  _, variables = jax.eval_shape(lambda: apply_fn(*args, mutable=["cache"], **kwargs))
  return jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), variables["cache"])


def cache_batch_axes(make_cache: Callable[[int], Cache]) -> Any:
  """For each cache leaf, its batch axis (or -1 when it has none), from the abstract
  caches `make_cache(1)` and `make_cache(2)` of two batch sizes."""
  one, two = (jax.eval_shape(lambda: make_cache(b)) for b in (1, 2))

  def axis(a, b):
    diff = [i for i, (x, y) in enumerate(zip(a.shape, b.shape)) if x != y]
    return diff[0] if diff else -1
  return jax.tree.map(axis, one, two)


def reorder_cache(cache: Cache, axes: Any, indices: jax.Array) -> Cache:
  """Gathers `indices` (flat beam indices [B * beams]) along each leaf's batch axis."""
  return jax.tree.map(lambda x, a: x if a < 0 else jnp.take(x, indices, axis=a), cache, axes)
