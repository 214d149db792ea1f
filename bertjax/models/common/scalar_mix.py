"""ELMo's task-specific scalar mix of layers (Peters et al., 2018, eq. 1).

  mix = gamma * sum_k softmax(w)_k * h_k

over the K layers of a frozen model, with w (zeros: the plain average to start) and the
global scale gamma (1) learned by the task. With `layer_norm` (AllenNLP's
`do_layer_norm`), each layer is first normalised by its mean and variance over all of
its real (mask 1) elements, so layers of different scales mix fairly.

Every feature-based head in bertjax mixes layers with this module (finetune.feature_based
for BERT-style encoders and ELMo alike).
"""
from typing import Optional

import flax.linen as nn
import jax
import jax.numpy as jnp


class ScalarMix(nn.Module):
  """x [..., K, H] (layers on the second-to-last axis) -> [..., H].

  mask [...] (the leading axes of x, 1 = real) is needed with `layer_norm`.
  """
  layer_norm: bool = False
  epsilon: float = 1e-12

  @nn.compact
  def __call__(self, x: jax.Array, mask: Optional[jax.Array] = None) -> jax.Array:
    weights = self.param("weights", nn.initializers.zeros, (x.shape[-2],))
    gamma = self.param("gamma", nn.initializers.ones, ())
    if self.layer_norm:
      if mask is None or mask.shape != x.shape[:-2]:
        raise ValueError(f"ScalarMix(layer_norm=True) needs a mask of shape {x.shape[:-2]} "
                         f"(the layers' leading axes); got "
                         f"{None if mask is None else mask.shape}.")
      x = _normalise_layers(x, mask, self.epsilon)
    return gamma * jnp.einsum("...kh,k->...h", x, jax.nn.softmax(weights))


def _normalise_layers(x: jax.Array, mask: jax.Array, epsilon: float) -> jax.Array:
  """Each layer k of x [..., K, H] minus its mean, over the square root of its variance,
  both taken over the real positions (all of their H features) only, as AllenNLP."""
  real = mask.astype(x.dtype)[..., None, None]  # [..., 1, 1]
  lead = tuple(range(x.ndim - 2))
  count = jnp.maximum(real.sum() * x.shape[-1], 1.0)
  mean = (x * real).sum(axis=lead + (x.ndim - 1,), keepdims=True) / count
  variance = (((x - mean) * real) ** 2).sum(axis=lead + (x.ndim - 1,), keepdims=True) / count
  return (x - mean) / jnp.sqrt(variance + epsilon)
