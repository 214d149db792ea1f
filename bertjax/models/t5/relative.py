"""T5's bucketed relative position bias (Raffel et al., 2020, section 2.1).

Each head learns one scalar per bucket of the relative distance `key - query`; the
bias is added to the attention logits. Small distances get a bucket each, larger ones
share logarithmically wider buckets up to `max_distance`, beyond which all distances
share the last bucket. The encoder buckets both directions (half the buckets each);
the decoder only looks back, so it spends every bucket on the past.

The bias is computed once per stack and shared by all its layers (the reference stores
the table in layer 0).
"""
import math

import flax.linen as nn
import jax
import jax.numpy as jnp


def relative_position_bucket(relative_position: jax.Array, bidirectional: bool = True,
                             num_buckets: int = 32, max_distance: int = 128) -> jax.Array:
  """Bucket index in [0, num_buckets) of each `key_position - query_position`."""
  relative_position = jnp.asarray(relative_position, jnp.int32)
  buckets = jnp.zeros_like(relative_position)
  if bidirectional:
    num_buckets //= 2
    buckets = buckets + (relative_position > 0).astype(jnp.int32) * num_buckets
    distance = jnp.abs(relative_position)
  else:
    distance = -jnp.minimum(relative_position, 0)
  max_exact = num_buckets // 2
  is_small = distance < max_exact
  # float32 log, truncated towards zero, as the reference (and Mesh TensorFlow) does.
  # Distances below max_exact take the other branch; the clamp only avoids log(0).
  scaled = (jnp.log(jnp.maximum(distance, 1).astype(jnp.float32) / max_exact)
            / math.log(max_distance / max_exact) * (num_buckets - max_exact))
  large = jnp.minimum(max_exact + scaled.astype(jnp.int32), num_buckets - 1)
  return buckets + jnp.where(is_small, distance, large)


class RelativePositionBias(nn.Module):
  """[1, heads, q, k] additive attention bias from a [num_buckets, heads] table.

  `query_offset` is the absolute position of the first query (the cache index when
  decoding one token at a time); keys always start at position 0.
  """
  num_heads: int
  num_buckets: int = 32
  max_distance: int = 128
  bidirectional: bool = True
  init_std: float = 1.0
  dtype: jnp.dtype = jnp.float32

  @nn.compact
  def __call__(self, query_length: int, key_length: int, query_offset=0) -> jax.Array:
    table = self.param(
        "embedding",
        nn.with_logical_partitioning(nn.initializers.normal(self.init_std),
                                     ("relpos_buckets", "heads")),
        (self.num_buckets, self.num_heads), jnp.float32)
    query = jnp.arange(query_length)[:, None] + query_offset
    key = jnp.arange(key_length)[None, :]
    bucket = relative_position_bucket(key - query, self.bidirectional, self.num_buckets,
                                      self.max_distance)
    values = jnp.take(table, bucket, axis=0)          # [q, k, heads]
    return jnp.transpose(values, (2, 0, 1))[None].astype(self.dtype)
