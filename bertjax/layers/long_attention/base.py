"""What the long-sequence self-attentions (Linformer, BigBird, Longformer) share: the spec
that made them, MultiHeadAttention's fields, and its projections (named and sharded as
MultiHeadAttention's, so a dense checkpoint's weights fit them)."""
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp

from bertjax.layers.long_attention import token_mask as tm


class LongSelfAttention(nn.Module):
  """Self-attention without an additive bias; subclasses' `__call__(inputs_q, inputs_kv,
  mask, bias, *, deterministic, layer_index)` is MultiHeadAttention's."""
  spec: Any
  num_heads: int
  head_dim: int
  use_bias: bool = True
  init_std: float = 0.02
  dtype: Any = jnp.float32

  def check_self_attention(self, inputs_kv, bias) -> None:
    if inputs_kv is not None or bias is not None:
      raise ValueError(f"{type(self).__name__} is self-attention without an additive bias.")

  def project(self, name: str, x: jax.Array) -> jax.Array:
    """[B, L, embed] -> [B, L, heads, kv] by the projection `name` ('query', 'key', ...)."""
    return tm.head_projection(name, self.num_heads, self.head_dim, self.use_bias,
                              self.init_std, self.dtype)(x)

  def query_scale(self) -> jax.Array:
    return jnp.sqrt(self.head_dim).astype(self.dtype)

  def output(self, context: jax.Array, features: int) -> jax.Array:
    """[B, L, heads, kv] -> [B, L, features] by the `out` projection."""
    context = nn.with_logical_constraint(context, ("batch", "length", "heads", "kv"))
    out = tm.output_projection(features, self.use_bias, self.init_std, self.dtype)(context)
    return nn.with_logical_constraint(out, ("batch", "length", "embed"))
