"""Normalization layers with logical axis names on their parameters."""
import flax.linen as nn
import jax
import jax.numpy as jnp

Dtype = jnp.dtype


class LayerNorm(nn.Module):
  """LayerNorm over the last axis (BERT uses eps 1e-12), computed in float32.

  Variance is E[(x - mean)^2], as PyTorch computes it, rather than E[x^2] - E[x]^2,
  which loses precision on large activations.
  """
  epsilon: float = 1e-12
  dtype: Dtype = jnp.float32
  use_bias: bool = True
  axis_name: str = "embed"

  @nn.compact
  def __call__(self, x: jax.Array) -> jax.Array:
    features = (x.shape[-1],)
    scale = self.param("scale", nn.with_logical_partitioning(nn.initializers.ones, (self.axis_name,)),
                       features, jnp.float32)
    x32 = x.astype(jnp.float32)
    centered = x32 - jnp.mean(x32, axis=-1, keepdims=True)
    y = centered * jax.lax.rsqrt(jnp.mean(centered * centered, axis=-1, keepdims=True) + self.epsilon)
    y = y * scale
    if self.use_bias:
      y = y + self.param("bias", nn.with_logical_partitioning(nn.initializers.zeros, (self.axis_name,)),
                         features, jnp.float32)
    return y.astype(self.dtype)


class RMSNorm(nn.Module):
  """T5's norm: scale by the root mean square, no mean subtraction, no bias."""
  epsilon: float = 1e-6
  dtype: Dtype = jnp.float32

  @nn.compact
  def __call__(self, x: jax.Array) -> jax.Array:
    scale = self.param("scale",
                       nn.with_logical_partitioning(nn.initializers.ones, ("embed",)),
                       (x.shape[-1],), jnp.float32)
    x32 = x.astype(jnp.float32)
    x32 = x32 * jax.lax.rsqrt(jnp.mean(x32 * x32, axis=-1, keepdims=True) + self.epsilon)
    return (x32 * scale).astype(self.dtype)
