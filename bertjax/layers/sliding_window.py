"""Sliding-window self-attention: each query sees only the keys at most `radius` positions
away (ModernBERT's local layers), computed so that the keys outside the window cost nothing.

- On the explicit path the queries are cut into chunks of `radius`; a chunk scores only its
  own, the previous and the next chunk of keys, so time and memory grow linearly with the
  length instead of with its square. No [L, L] score or mask array is formed.
- With the fused kernel (`implementation='cudnn'`) the window goes to
  jax.nn.dot_product_attention's `local_window_size`.
- When the caller looks inside (a head mask, or the probabilities recorded for analysis),
  the dense [L, L] form with the window in its mask serves it, as attention.py's.

Every path computes the same function, padding queries included: a query left with no key
it may see (a padding token whose window holds only padding) spreads its weight evenly over
all keys, as the dense softmax does (and transformers' with it).
"""
from typing import Optional

import jax
import jax.numpy as jnp
import numpy as np

from bertjax.layers import attention
from bertjax.layers.long_attention import token_mask as tm


def window_mask(length: int, radius: int) -> jax.Array:
  """[1, 1, L, L]: query i may see key j when |i - j| <= radius."""
  index = jnp.arange(length)
  return (jnp.abs(index[:, None] - index[None, :]) <= radius)[None, None]


def dense_mask(mask: Optional[tm.TokenMask], length: int, radius: int) -> jax.Array:
  """The [B | 1, 1, L, L] boolean mask the window and `mask` (padding, segments) make."""
  per_token = None
  if mask is not None:
    per_token = attention.encoder_mask(mask.valid, mask.segment_ids)
  return attention.combine_masks(per_token, window_mask(length, radius))


def _chunk_windows(x: jax.Array, chunk: int) -> jax.Array:
  """[B, n, ...] -> [B, n / chunk, 3 * chunk, ...]: chunk i's previous, own and next chunk
  (zeros past either end)."""
  batch, n = x.shape[:2]
  widths = [(0, 0), (chunk, chunk)] + [(0, 0)] * (x.ndim - 2)
  x = jnp.pad(x, widths).reshape(batch, n // chunk + 2, chunk, *x.shape[2:])
  return jnp.concatenate([x[:, :-2], x[:, 1:-1], x[:, 2:]], axis=2)


def banded_attention(query: jax.Array, key: jax.Array, value: jax.Array,
                     mask: Optional[tm.TokenMask], radius: int, dropout, dtype) -> jax.Array:
  """[B, L, H, D] context of queries that see keys at offsets -radius..radius allowed by
  `mask`. query (already scaled), key, value: [B, L, H, D]. `dropout(probs)` is applied to
  the band's probabilities."""
  batch, length, heads, dim = query.shape
  chunk = radius
  mask = tm.resolve(mask, batch, length)
  pad = lambda x, value=0: tm.pad_to_multiple(x, chunk, value=value)
  valid = pad(mask.valid, False)
  n = valid.shape[1]
  queries = pad(query).reshape(batch, n // chunk, chunk, heads, dim)
  logits = jnp.einsum("bnqhd,bnkhd->bhnqk", queries, _chunk_windows(pad(key), chunk))
  offset = np.arange(3 * chunk)[None, :] - chunk - np.arange(chunk)[:, None]
  keep = (np.abs(offset) <= radius)[None, None] & _chunk_windows(valid, chunk)[:, :, None, :]
  if mask.segment_ids is not None:
    segments = pad(mask.segment_ids)
    keep = keep & (segments.reshape(batch, n // chunk, chunk)[..., None]
                   == _chunk_windows(segments, chunk)[:, :, None, :])
  probs = dropout(tm.softmax_masked(logits, keep[:, None]))              # [B, H, nc, c, 3c]
  context = jnp.einsum("bhnqk,bnkhd->bnqhd", probs.astype(dtype), _chunk_windows(pad(value), chunk))
  context = context.reshape(batch, n, heads, dim)[:, :length]
  # A query with no key to see: the dense softmax's even spread over every key.
  seen_nothing = ~keep.any(-1).reshape(batch, n)[:, :length, None, None]
  return jnp.where(seen_nothing, value.mean(axis=1, keepdims=True).astype(context.dtype), context)


class SlidingWindowAttention(attention.MultiHeadAttention):
  """MultiHeadAttention (the same parameters) over a sliding window of `radius` keys on
  each side. Its `mask` is a TokenMask (padding and packed segments per token) or None."""
  radius: int = 64

  def attend(self, query, key, value, mask, bias, deterministic):
    length = query.shape[1]
    if bias is not None or attention.looked_into(self) or length <= self.radius + 1:
      # The dense form: what analysis reads, and no dearer when the window spans the row.
      return super().attend(query, key, value, dense_mask(mask, length, self.radius), bias,
                            deterministic)
    if self.implementation != "xla":
      per_token = None if mask is None else attention.encoder_mask(mask.valid, mask.segment_ids)
      return attention.fused_attention(
          query, key, value, per_token, None, self.scale_logits, self.implementation,
          not deterministic and self.dropout_rate > 0, local_window_size=self.radius)
    if self.scale_logits:
      query = query / jnp.sqrt(query.shape[-1]).astype(query.dtype)
    dropout = lambda p: attention.attention_dropout(self, p, self.dropout_rate, deterministic)
    return banded_attention(query, key, value, mask, self.radius, dropout, self.dtype)
