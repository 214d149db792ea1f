"""Linformer (Wang et al., 2020): self-attention with keys and values projected along the
sequence to k rows, so scores are [L, k] instead of [L, L] - linear in L for a fixed k.

  head_i = softmax(Q_i (E K_i)^T / sqrt(d)) (F V_i),   E, F: [k, L]

Sharing (the paper's section 4): 'none' - E and F per head and layer; 'headwise' - one
E and one F per layer; 'key_value' - one matrix per layer for keys and values (E = F);
'layerwise' - one matrix for every layer, head, keys and values (created once by the
Transformer stack and handed to every layer with the mask).

Padding keys are zeroed before the projection (they then add nothing to E K). Packed
examples cannot be kept apart once positions are mixed: segment_ids serve as a padding
mask only, and a row holding more than one example gets NaN outputs (so a packed run
stops instead of silently mixing examples); train Linformer on unpacked batches
(`task_dataset.pack = False`, as gin/models/linformer_*.gin do).
"""
import dataclasses
from typing import Optional

import flax.linen as nn
import jax
import jax.numpy as jnp

from bertjax.layers.long_attention import base
from bertjax.layers.long_attention import token_mask as tm

SHARING = ("none", "headwise", "key_value", "layerwise")


def projection_init(max_length: int):
  """N(0, 1/L): E K then keeps the scale of one key."""
  return nn.initializers.normal(max_length ** -0.5)


@dataclasses.dataclass(frozen=True)
class Linformer:
  projected_length: int = 256
  max_length: int = 512
  sharing: str = "headwise"

  def __post_init__(self):
    if self.sharing not in SHARING:
      raise ValueError(f"Linformer.sharing={self.sharing!r}; expected one of {SHARING}.")

  def make(self, *, num_heads, head_dim, dropout_rate, use_bias, init_std, dtype, num_layers,
           name):
    del num_layers
    return LinformerAttention(self, num_heads, head_dim, use_bias, init_std, dtype,
                              dropout_rate=dropout_rate, name=name)

  def encoder_mask(self, attention_mask, segment_ids, global_attention_mask=None):
    return tm.from_features(attention_mask, segment_ids)

  def stack_inputs(self, stack: nn.Module, mask):
    """Layerwise sharing: the one projection, created in the stack, rides with the mask."""
    if self.sharing != "layerwise":
      return mask
    projection = stack.param(
        "linformer_projection",
        nn.with_logical_partitioning(projection_init(self.max_length), ("kv_length", None)),
        (self.max_length, self.projected_length), jnp.float32)
    return (mask, projection)


class LinformerAttention(base.LongSelfAttention):
  """Self-attention with MultiHeadAttention's projections plus E / F (`key_projection`,
  `value_projection`, [heads,] max_length x k) per the spec's sharing."""
  spec: Linformer
  dropout_rate: float = 0.0

  def _projection(self, name: str) -> jax.Array:
    spec = self.spec
    per_head = spec.sharing == "none"
    shape = ((self.num_heads,) if per_head else ()) + (spec.max_length, spec.projected_length)
    axes = (("heads",) if per_head else ()) + ("kv_length", None)
    return self.param(name, nn.with_logical_partitioning(projection_init(spec.max_length), axes),
                      shape, jnp.float32)

  @nn.compact
  def __call__(self, inputs_q, inputs_kv=None, mask=None, bias=None, *, deterministic=True,
               layer_index=None):
    self.check_self_attention(inputs_kv, bias)
    batch, length, features = inputs_q.shape
    spec = self.spec
    if length > spec.max_length:
      raise ValueError(f"Linformer got {length} tokens but its projections cover "
                       f"max_length={spec.max_length}; raise Linformer.max_length.")
    shared: Optional[jax.Array] = None
    if spec.sharing == "layerwise":
      if not isinstance(mask, tuple) or isinstance(mask, tm.TokenMask):
        raise ValueError("Layerwise-shared Linformer runs inside a TransformerStack, which "
                         "passes the shared projection with the mask.")
      mask, shared = mask
    mask = tm.resolve(mask, batch, length)

    q = self.project("query", inputs_q) / self.query_scale()
    keep = mask.valid[:, :, None, None]
    k = jnp.where(keep, self.project("key", inputs_q), 0)
    v = jnp.where(keep, self.project("value", inputs_q), 0)

    if shared is not None:
      e = f = shared
    else:
      e = self._projection("key_projection")
      f = e if spec.sharing == "key_value" else self._projection("value_projection")
    along = lambda x, p: jnp.einsum(
        "bnhd,hnk->bkhd" if p.ndim == 3 else "bnhd,nk->bkhd", x, p[..., :length, :].astype(x.dtype))
    k, v = along(k, e), along(v, f)                                      # [B, k, H, D]

    probs = tm.softmax_masked(jnp.einsum("bqhd,bkhd->bhqk", q, k), None)
    probs = tm.dropout(self, probs, self.dropout_rate, deterministic)
    context = jnp.einsum("bhqk,bkhd->bqhd", probs.astype(v.dtype), v)
    if mask.segment_ids is not None:  # packed rows cannot be separated: poison them
      packed = jnp.max(mask.segment_ids, axis=1) > 1
      context = jnp.where(packed[:, None, None, None], jnp.nan, context)
    return self.output(context, features)
