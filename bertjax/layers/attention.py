"""Multi-head dot-product attention with padding/segment masks and an additive bias hook.

Masks are boolean and broadcastable to [batch, heads, q_length, kv_length]; True means
"may attend". Relative-position schemes (T5 buckets, DeBERTa, XLNet) plug in through
`bias`, an additive term of the same broadcast shape added to the logits.

Looking inside (bertjax.analysis): every attention layer passes its probabilities through
`observe`, which multiplies them by a head mask when the caller supplies one (the
`head_mask` collection) and records them when the caller asks (the `intermediates`
collection made mutable). Neither adds anything to the computation otherwise.
"""
from typing import Optional

import flax.linen as nn
import jax
import jax.numpy as jnp

from bertjax.layers import dense, kv_cache, rotary

Dtype = jnp.dtype


def key_padding_mask(attention_mask: jax.Array) -> jax.Array:
  """[B, K] 1/0 padding mask -> [B, 1, 1, K] boolean: every query may see every real key."""
  return attention_mask.astype(bool)[:, None, None, :]


def segment_mask(q_segment_ids: jax.Array, kv_segment_ids: Optional[jax.Array] = None) -> jax.Array:
  """Packed examples: a token sees only tokens of its own example. Segment 0 is padding."""
  if kv_segment_ids is None:
    kv_segment_ids = q_segment_ids
  same = q_segment_ids[:, :, None] == kv_segment_ids[:, None, :]
  return (same & (kv_segment_ids[:, None, :] > 0))[:, None, :, :]


def causal_mask(length: int) -> jax.Array:
  """[1, 1, L, L]: position i sees positions <= i."""
  return jnp.tril(jnp.ones((length, length), bool))[None, None]


def combine_masks(*masks: Optional[jax.Array]) -> Optional[jax.Array]:
  """Logical AND of the masks that are given (None ones are ignored)."""
  present = [m for m in masks if m is not None]
  if not present:
    return None
  out = present[0]
  for m in present[1:]:
    out = jnp.logical_and(out, m)
  return out


def encoder_mask(attention_mask: Optional[jax.Array],
                 segment_ids: Optional[jax.Array]) -> Optional[jax.Array]:
  """The usual self-attention mask of an encoder from its batch features."""
  return combine_masks(
      None if attention_mask is None else key_padding_mask(attention_mask),
      None if segment_ids is None else segment_mask(segment_ids))


class MultiHeadAttention(nn.Module):
  """Self- or cross-attention: `query`, `key`, `value` and `out` projections.

  Kernels are stored per head ([embed, heads, kv] and [heads, kv, embed]) so the
  `heads` axis can be sharded over the mesh's `model` axis.

  decode: incremental self-attention with a key/value cache (bertjax.layers.kv_cache);
  `mask` and `bias` then span the whole cache ([..., q, cache_length]) and the cache adds
  the causal / not-yet-filled part of the mask itself.
  cache_cross_kv: cross-attention during decoding; keys/values of `inputs_kv` are
  projected once and kept in the 'cross_cache' collection (kv_cache.cross_key_value),
  so later calls may pass `inputs_kv=None`.
  """
  num_heads: int
  head_dim: int
  dropout_rate: float = 0.0
  use_bias: bool = True
  scale_logits: bool = True  # T5 folds 1/sqrt(d) into its initialization instead.
  init_std: float = 0.02
  dtype: Dtype = jnp.float32
  decode: bool = False
  cache_cross_kv: bool = False
  implementation: str = "xla"  # see IMPLEMENTATIONS
  # Rotary positions (bertjax.layers.rotary) on queries and keys with this base; 0: none.
  rotary_base: float = 0.0

  def _projection(self, name: str) -> dense.DenseGeneral:
    return dense.DenseGeneral((self.num_heads, self.head_dim), ("embed", "heads", "kv"),
                              use_bias=self.use_bias, init_std=self.init_std, dtype=self.dtype,
                              name=name)

  @nn.compact
  def __call__(self, inputs_q: jax.Array, inputs_kv: Optional[jax.Array] = None,
               mask: Optional[jax.Array] = None, bias: Optional[jax.Array] = None,
               positions: Optional[jax.Array] = None, *, deterministic: bool = True) -> jax.Array:
    """positions: [B, L] token positions for rotary self-attention (default 0..L-1)."""
    if inputs_kv is None and not self.cache_cross_kv:
      inputs_kv = inputs_q
    query = self._projection("query")(inputs_q)
    project = lambda x: (self._projection("key")(x), self._projection("value")(x))
    if self.cache_cross_kv:
      key, value = kv_cache.cross_key_value(self, inputs_kv, project)
    else:
      key, value = project(inputs_kv)
    if self.rotary_base:
      query, key = self._rotate(query, key, positions)
    query = nn.with_logical_constraint(query, ("batch", "length", "heads", "kv"))
    key = nn.with_logical_constraint(key, ("batch", "kv_length", "heads", "kv"))
    value = nn.with_logical_constraint(value, ("batch", "kv_length", "heads", "kv"))
    if self.decode:
      key, value, filled = kv_cache.update(self, key, value)
      mask = combine_masks(mask, filled)

    context = self.attend(query, key, value, mask, bias, deterministic)
    context = nn.with_logical_constraint(context, ("batch", "length", "heads", "kv"))

    out = dense.DenseGeneral(inputs_q.shape[-1], ("heads", "kv", "embed"), contract_dims=2,
                             use_bias=self.use_bias, init_std=self.init_std, dtype=self.dtype,
                             name="out")(context)
    return nn.with_logical_constraint(out, ("batch", "length", "embed"))

  def attend(self, query: jax.Array, key: jax.Array, value: jax.Array, mask, bias,
             deterministic: bool) -> jax.Array:
    """[B, Q, heads, d] context of the projected (and rotated) heads: the explicit
    softmax, or the fused kernel of `implementation`. Subclasses change how keys are
    chosen (bertjax.layers.sliding_window)."""
    if self.implementation == "xla" or looked_into(self):
      probs = attention_probs(query, key, mask, bias, self.scale_logits)
      probs = observe(self, attention_dropout(self, probs, self.dropout_rate, deterministic))
      return jnp.einsum("bhqk,bkhd->bqhd", probs.astype(self.dtype), value)
    return fused_attention(query, key, value, mask, bias, self.scale_logits,
                           self.implementation, not deterministic and self.dropout_rate > 0)

  def _rotate(self, query: jax.Array, key: jax.Array, positions: Optional[jax.Array]):
    if self.decode or self.cache_cross_kv or query.shape[1] != key.shape[1]:
      raise ValueError("Rotary positions are implemented for encoder self-attention only "
                       "(no key/value cache, no cross-attention).")
    if positions is None:
      positions = jnp.broadcast_to(jnp.arange(query.shape[1]), query.shape[:2])
    return (rotary.rotate(query, positions, self.rotary_base),
            rotary.rotate(key, positions, self.rotary_base))


# `implementation`: 'xla' builds softmax(q k^T) explicitly (any backend; attention dropout,
# head masks and recorded probabilities work); 'cudnn' is jax.nn.dot_product_attention's
# fused kernel (NVIDIA GPUs), which never materializes the probabilities and has no dropout.
IMPLEMENTATIONS = ("xla", "cudnn")


def check_implementation(name: str) -> None:
  if name not in IMPLEMENTATIONS:
    raise ValueError(f"attention_implementation={name!r}: use one of {IMPLEMENTATIONS}.")


def looked_into(module: nn.Module) -> bool:
  """Whether the caller gave a head mask or asked for the probabilities (`observe`): then
  only the explicit path can serve it."""
  return (module.has_variable(HEAD_MASK, HEAD_MASK_NAME)
          or module.is_mutable_collection(INTERMEDIATES))


def fused_attention(query, key, value, mask, bias, scale_logits: bool, implementation: str,
                    dropout: bool, local_window_size: Optional[int] = None) -> jax.Array:
  """[B, Q, heads, d] context through jax.nn.dot_product_attention's `implementation`;
  `local_window_size`: each query sees only the keys at most that far away (its sliding
  window, which the kernel skips outside of)."""
  check_implementation(implementation)
  if dropout:
    raise ValueError(f"attention_implementation={implementation!r} has no attention dropout; "
                     "set attention_dropout = 0 to train with it, or use 'xla'.")
  if implementation == "cudnn" and jax.default_backend() != "gpu":
    raise ValueError(f"attention_implementation='cudnn' needs an NVIDIA GPU; this process runs "
                     f"on {jax.default_backend()!r}. Use 'xla'.")
  if mask is not None:
    mask = jnp.broadcast_to(mask, (query.shape[0], 1, query.shape[1], key.shape[1]))
  return jax.nn.dot_product_attention(
      query, key, value, bias=None if bias is None else bias.astype(query.dtype), mask=mask,
      scale=None if scale_logits else 1.0, implementation=implementation,
      local_window_size=None if local_window_size is None else (local_window_size,) * 2)


def attention_probs(query: jax.Array, key: jax.Array, mask: Optional[jax.Array] = None,
                    bias: Optional[jax.Array] = None, scale_logits: bool = True) -> jax.Array:
  """softmax(q k^T [/ sqrt(d)] + bias) over keys, in float32, with masked keys at -inf.

  A row whose keys are all masked (e.g. a padding query in a packed batch) gets a
  uniform distribution rather than NaN, as in the reference implementations.
  """
  if scale_logits:
    query = query / jnp.sqrt(query.shape[-1]).astype(query.dtype)
  logits = jnp.einsum("bqhd,bkhd->bhqk", query, key).astype(jnp.float32)
  if bias is not None:
    logits = logits + bias.astype(jnp.float32)
  if mask is not None:
    logits = jnp.where(mask, logits, jnp.finfo(jnp.float32).min)
  return jax.nn.softmax(logits, axis=-1)


# The collections of `observe`: a head mask read from HEAD_MASK (variable HEAD_MASK_NAME,
# [heads], stacked [layers, heads] over a scanned stack), probabilities written to
# INTERMEDIATES (name PROBS_NAME, [batch, heads, query, key]).
HEAD_MASK = "head_mask"
HEAD_MASK_NAME = "head_mask"
INTERMEDIATES = "intermediates"
PROBS_NAME = "attention_probs"
# What a scanned layer stack adds to its `variable_axes` so both come out per layer.
ANALYSIS_AXES = {HEAD_MASK: 0, INTERMEDIATES: 0}


def attention_dropout(module: nn.Module, probs: jax.Array, rate: float, deterministic: bool) -> jax.Array:
  """Attention dropout on the probabilities (inverted: kept entries scaled by 1 / (1 - rate))."""
  if deterministic or rate <= 0:
    return probs
  keep = jax.random.bernoulli(module.make_rng("dropout"), 1.0 - rate, probs.shape)
  return jnp.where(keep, probs / (1.0 - rate), 0.0)


def observe(module: nn.Module, probs: jax.Array, name: str = PROBS_NAME) -> jax.Array:
  """`probs` [batch, heads, query, key] (after dropout) times the caller's head mask, if any,
  recorded as `name` when the caller made INTERMEDIATES mutable (as transformers' attention
  returns them: after dropout and the head mask). Without either it returns `probs` as is,
  so a model nobody looks into computes exactly what it did before."""
  if module.has_variable(HEAD_MASK, HEAD_MASK_NAME):
    head_mask = module.get_variable(HEAD_MASK, HEAD_MASK_NAME)
    probs = probs * jnp.asarray(head_mask, probs.dtype)[None, :, None, None]
  module.sow(INTERMEDIATES, name, probs)
  return probs
