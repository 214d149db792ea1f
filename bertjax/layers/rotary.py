"""Rotary position embeddings (Su et al., 2021, "RoFormer"), as GPT-NeoX, LLaMA and
ModernBERT apply them.

Each query and key vector is rotated, pair of features by pair of features, by an angle
proportional to its token's position: features i and i + d/2 (the "rotate half" layout of
transformers' `apply_rotary_pos_emb`) turn by position * base^(-2i/d). The dot product of a
rotated query and key then depends on their positions only through the offset between
them, so attention can prefer a neighbour at a fixed distance from the first step, with no
position table to learn and no length limit.
"""
import jax
import jax.numpy as jnp


def frequencies(head_dim: int, base: float) -> jax.Array:
  """[head_dim / 2] inverse frequencies base^(-2i / head_dim)."""
  if head_dim % 2:
    raise ValueError(f"Rotary positions need an even head_dim; got {head_dim}.")
  if base <= 0:
    raise ValueError(f"Rotary base must be > 0; got {base}.")
  return 1.0 / (base ** (jnp.arange(0, head_dim, 2, dtype=jnp.float32) / head_dim))


def rotate(x: jax.Array, positions: jax.Array, base: float) -> jax.Array:
  """x [batch, length, heads, head_dim] rotated by positions [batch, length] (in float32,
  returned in x's dtype)."""
  angles = positions.astype(jnp.float32)[..., None] * frequencies(x.shape[-1], base)
  cos = jnp.cos(angles)[:, :, None, :]  # [B, L, 1, d/2]
  sin = jnp.sin(angles)[:, :, None, :]
  first, second = jnp.split(x.astype(jnp.float32), 2, axis=-1)
  rotated = jnp.concatenate([first * cos - second * sin, second * cos + first * sin], axis=-1)
  return rotated.astype(x.dtype)
