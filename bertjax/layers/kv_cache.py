"""The key/value cache of incremental decoding (see bertjax.decoding for the protocol).

A decoding attention layer keeps, in the 'cache' collection,
  cached_key, cached_value: [batch, cache_length, heads, kv]
  cache_index:              []  int32, how many positions are filled.
Each call writes its `q` new keys/values at `cache_index` (one token per step, or a
whole prompt at once) and attends over all `cache_length` slots; slots not filled yet,
and filled slots after a query's own position, are masked out.

The cache is created, empty, by one call on a full-length input (`cache_length` is that
input's length); that call writes nothing, so decoding starts at index 0.
"""
import flax.linen as nn
import jax
import jax.numpy as jnp


def is_initialized(module: nn.Module) -> bool:
  return module.has_variable("cache", "cached_key")


def update(module: nn.Module, key: jax.Array, value: jax.Array):
  """Writes `key`/`value` [B, q, H, D] into `module`'s cache.

  Returns (all keys, all values, visibility mask [1, 1, q, cache_length]) once the cache
  exists; on the creating call returns the inputs and a causal mask over them.
  """
  ready = is_initialized(module)
  cached_key = module.variable("cache", "cached_key", jnp.zeros, key.shape, key.dtype)
  cached_value = module.variable("cache", "cached_value", jnp.zeros, value.shape, value.dtype)
  index = module.variable("cache", "cache_index", lambda: jnp.zeros((), jnp.int32))
  q = key.shape[1]
  if not ready:
    return key, value, jnp.tril(jnp.ones((q, q), bool))[None, None]
  start = index.value
  zero = jnp.zeros((), jnp.int32)
  cached_key.value = jax.lax.dynamic_update_slice(
      cached_key.value, key.astype(cached_key.value.dtype), (zero, start, zero, zero))
  cached_value.value = jax.lax.dynamic_update_slice(
      cached_value.value, value.astype(cached_value.value.dtype), (zero, start, zero, zero))
  index.value = start + q
  return cached_key.value, cached_value.value, visible(start, q, cached_key.value.shape[1])


def visible(start, query_length: int, cache_length: int) -> jax.Array:
  """[1, 1, q, cache_length]: query i (at position start + i) sees slots <= its position."""
  query_pos = start + jnp.arange(query_length)
  return (jnp.arange(cache_length)[None, :] <= query_pos[:, None])[None, None]


def step_positions(module: nn.Module, length: int) -> tuple[jax.Array, int]:
  """A stack-level position counter for modules that need the absolute position of the
  new tokens (learned positions, T5's relative bias against every cache slot).

  Returns (position of the first of the `length` new tokens, cache_length) and marks
  them filled (not on the creating call, where `length` is the cache length).
  """
  ready = module.has_variable("cache", "filled")
  filled = module.variable("cache", "filled", jnp.zeros, (length,), bool)
  start = jnp.sum(filled.value, dtype=jnp.int32)
  cache_length = filled.value.shape[0]
  if ready:
    filled.value = jnp.arange(cache_length) < start + length
  return start, cache_length
