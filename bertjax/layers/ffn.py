"""Position-wise feed-forward block."""
from typing import Optional

import flax.linen as nn
import jax
import jax.numpy as jnp

from bertjax.layers import activations, dense

Dtype = jnp.dtype


class MlpBlock(nn.Module):
  """Dense(embed -> mlp), activation, Dense(mlp -> embed), dropout on the output.

  intermediate_dropout: also drop after the activation (XLNet, Transformer-XL).
  intermediate_dropout_rate: its rate when it differs from `dropout_rate` (BART's
    activation_dropout).
  gated: a GLU variant (Shazeer, 2020; T5 v1.1): activation(x W) * (x V), where V is
    `intermediate_linear`.
  """
  intermediate_size: int
  activation: str = "gelu"
  dropout_rate: float = 0.0
  use_bias: bool = True
  init_std: float = 0.02
  dtype: Dtype = jnp.float32
  intermediate_dropout: bool = False
  gated: bool = False
  intermediate_dropout_rate: Optional[float] = None

  @nn.compact
  def __call__(self, x: jax.Array, *, deterministic: bool = True) -> jax.Array:
    width = x.shape[-1]
    h = dense.DenseGeneral(self.intermediate_size, ("embed", "mlp"), use_bias=self.use_bias,
                           init_std=self.init_std, dtype=self.dtype, name="intermediate")(x)
    h = activations.get_activation(self.activation)(h)
    if self.gated:
      h = h * dense.DenseGeneral(self.intermediate_size, ("embed", "mlp"), use_bias=self.use_bias,
                                 init_std=self.init_std, dtype=self.dtype,
                                 name="intermediate_linear")(x)
    h = nn.with_logical_constraint(h, ("batch", "length", "mlp"))
    if self.intermediate_dropout:
      rate = self.dropout_rate if self.intermediate_dropout_rate is None \
          else self.intermediate_dropout_rate
      h = nn.Dropout(rate)(h, deterministic=deterministic)
    h = dense.DenseGeneral(width, ("mlp", "embed"), use_bias=self.use_bias,
                           init_std=self.init_std, dtype=self.dtype, name="output")(h)
    return nn.Dropout(self.dropout_rate)(h, deterministic=deterministic)
