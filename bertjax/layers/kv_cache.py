"""The key/value cache of incremental decoding (see bertjax.inference.decoding for the protocol).

A decoding attention layer keeps, in the 'cache' collection,
  cached_key, cached_value: [batch, cache_length, heads, kv]
  cache_index:              []  int32, how many positions are filled.
Each call writes its `q` new keys/values at `cache_index` (one token per step, or a
whole prompt at once) and attends over all `cache_length` slots; slots not filled yet,
and filled slots after a query's own position, are masked out.

The cache is created, empty, by one call on a full-length input (`cache_length` is that
input's length); that call writes nothing, so decoding starts at index 0.

Cross-attention keys/values depend only on the encoder output, so they are projected
once, by that same creating call, into a separate read-only collection
'cross_cache' (cross_key, cross_value: [batch, heads, kv, source_length]) that later steps read
but do not return: a mutable collection would be copied out of the layer scan and the
decoding loop at every step.
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


CROSS_COLLECTION = "cross_cache"


def cross_key_value(module: nn.Module, inputs_kv, project) -> tuple[jax.Array, jax.Array]:
  """Cross-attention keys/values: read from `module`'s 'cross_cache' when it holds them,
  else `project(inputs_kv)` -> (key, value), stored there when the collection is mutable
  (the creating call). Without a mutable 'cross_cache' nothing is stored, so they are
  recomputed at every step (the uncached baseline)."""
  if module.has_variable(CROSS_COLLECTION, "cross_key"):
    return tuple(jnp.transpose(module.get_variable(CROSS_COLLECTION, name), _FROM_STORED)
                 for name in ("cross_key", "cross_value"))
  if inputs_kv is None:
    raise ValueError(f"{module.name}: no cached cross-attention keys/values and no encoder "
                     "output to compute them from.")
  key, value = project(inputs_kv)
  if module.is_mutable_collection(CROSS_COLLECTION):
    module.put_variable(CROSS_COLLECTION, "cross_key", jnp.transpose(key, _TO_STORED))
    module.put_variable(CROSS_COLLECTION, "cross_value", jnp.transpose(value, _TO_STORED))
  return key, value


# Stored as [batch, heads, kv, source_length], the operand layout of the batched
# (batch, heads) attention dots: read back as [batch, source, heads, kv], the two
# transposes cancel, where the natural layout cost XLA:CPU a transposing copy of every
# layer's keys and values at every step (measured: benchmarks/results/results.md).
_TO_STORED = (0, 2, 3, 1)
_FROM_STORED = (0, 3, 1, 2)
