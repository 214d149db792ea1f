"""Per-token attention masks for attention that must never build an [L, L] mask.

Dense attention takes a boolean mask broadcastable to [B, heads, q, k]; with packed
examples that mask is [B, 1, L, L]. The long-sequence attentions (bertjax.layers.long_attention.sparse,
bertjax.layers.long_attention.linformer) take a `TokenMask` instead: the same information kept per token,
from which each computes only the mask entries its pattern visits.
"""
from typing import NamedTuple, Optional

import flax.linen as nn
import jax
import jax.numpy as jnp

from bertjax.layers import dense


class TokenMask(NamedTuple):
  valid: jax.Array                           # [B, L] bool: real (non-padding) tokens
  segment_ids: Optional[jax.Array] = None    # [B, L] int: packed example ids, 0 = padding
  global_tokens: Optional[jax.Array] = None  # [B, L] bool: tokens with global attention


def from_features(attention_mask: Optional[jax.Array], segment_ids: Optional[jax.Array],
                  global_attention_mask: Optional[jax.Array] = None) -> Optional[TokenMask]:
  """The encoder's batch features as a TokenMask (None when nothing is masked)."""
  if attention_mask is None and segment_ids is None and global_attention_mask is None:
    return None
  like = next(a for a in (attention_mask, segment_ids, global_attention_mask) if a is not None)
  valid = jnp.ones(like.shape, bool) if attention_mask is None else attention_mask.astype(bool)
  if segment_ids is not None:
    valid = valid & (segment_ids > 0)
  global_tokens = None
  if global_attention_mask is not None:
    global_tokens = global_attention_mask.astype(bool) & valid
  return TokenMask(valid, segment_ids, global_tokens)


def resolve(mask, batch: int, length: int) -> TokenMask:
  """A TokenMask with `valid` filled in, from a TokenMask, None, or a key-padding mask.

  A dense mask with a query axis (e.g. attention.segment_mask's [B, 1, L, L]) is refused:
  it is exactly the quadratic array these attentions exist to avoid.
  """
  if mask is None:
    return TokenMask(jnp.ones((batch, length), bool))
  if isinstance(mask, TokenMask):
    return mask
  if mask.ndim == 4 and mask.shape[1] == 1 and mask.shape[2] == 1:
    return TokenMask(jnp.broadcast_to(mask[:, 0, 0, :], (batch, length)))
  raise ValueError(f"Long-sequence attention got a dense mask of shape {mask.shape}; it takes "
                   "a TokenMask (bertjax.layers.long_attention.token_mask.from_features) or a [B, 1, 1, L] "
                   "key-padding mask. Give the encoder a config with `attention` set so it "
                   "builds a TokenMask for packed (segment_ids) batches.")


def pad_to_multiple(x: jax.Array, multiple: int, axis: int = 1, value=0) -> jax.Array:
  """Pads `axis` at the end up to a multiple of `multiple`."""
  extra = -x.shape[axis] % multiple
  if not extra:
    return x
  widths = [(0, 0)] * x.ndim
  widths[axis] = (0, extra)
  return jnp.pad(x, widths, constant_values=value)


def pad_mask(mask: TokenMask, multiple: int) -> TokenMask:
  """Padding positions added at the end are invalid, in segment 0, and not global."""
  return TokenMask(
      pad_to_multiple(mask.valid, multiple, value=False),
      None if mask.segment_ids is None else pad_to_multiple(mask.segment_ids, multiple),
      None if mask.global_tokens is None else pad_to_multiple(mask.global_tokens, multiple,
                                                              value=False))


def same_segment(q_segments: Optional[jax.Array], k_segments: Optional[jax.Array]):
  """q_segments == k_segments (broadcast), or None without packing."""
  if q_segments is None:
    return None
  return q_segments == k_segments


def head_projection(name: str, num_heads: int, head_dim: int, use_bias: bool, init_std: float,
                    dtype) -> dense.DenseGeneral:
  """[embed] -> [heads, kv], named and sharded like MultiHeadAttention's projections."""
  return dense.DenseGeneral((num_heads, head_dim), ("embed", "heads", "kv"), use_bias=use_bias,
                            init_std=init_std, dtype=dtype, name=name)


def output_projection(features: int, use_bias: bool, init_std: float, dtype) -> dense.DenseGeneral:
  return dense.DenseGeneral(features, ("heads", "kv", "embed"), contract_dims=2,
                            use_bias=use_bias, init_std=init_std, dtype=dtype, name="out")


def softmax_masked(logits: jax.Array, mask: Optional[jax.Array]) -> jax.Array:
  """softmax in float32 with masked entries at the float minimum (as attention.py does)."""
  logits = logits.astype(jnp.float32)
  if mask is not None:
    logits = jnp.where(mask, logits, jnp.finfo(jnp.float32).min)
  return jax.nn.softmax(logits, axis=-1)


def dropout(module: nn.Module, probs: jax.Array, rate: float, deterministic: bool) -> jax.Array:
  if deterministic or rate == 0:
    return probs
  keep = jax.random.bernoulli(module.make_rng("dropout"), 1.0 - rate, probs.shape)
  return jnp.where(keep, probs / (1.0 - rate), 0.0)
