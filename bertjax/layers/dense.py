"""A dense layer over several trailing input axes into several output axes.

Used for per-head projections ([embed] -> [heads, kv] and back). We keep our own
instead of flax's DenseGeneral: that one re-evaluates its boxed initializer at apply
time, which clashes with `nn.scan`'s stacked axis names under a mesh.
"""
from typing import Optional, Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp

Dtype = jnp.dtype


class DenseGeneral(nn.Module):
  """y = x . kernel (+ bias), contracting the last `contract_dims` axes of x.

  kernel_axes names every kernel axis: the contracted input axes, then the outputs.
  """
  features: int | Sequence[int]
  kernel_axes: Sequence[Optional[str]]
  contract_dims: int = 1
  use_bias: bool = True
  init_std: float = 0.02
  dtype: Dtype = jnp.float32

  @nn.compact
  def __call__(self, x: jax.Array) -> jax.Array:
    features = (self.features,) if isinstance(self.features, int) else tuple(self.features)
    in_shape = x.shape[x.ndim - self.contract_dims:]
    kernel = self.param(
        "kernel",
        nn.with_logical_partitioning(nn.initializers.normal(self.init_std), tuple(self.kernel_axes)),
        in_shape + features, jnp.float32)
    contract_x = tuple(range(x.ndim - self.contract_dims, x.ndim))
    contract_k = tuple(range(self.contract_dims))
    y = jax.lax.dot_general(x.astype(self.dtype), kernel.astype(self.dtype),
                            ((contract_x, contract_k), ((), ())))
    if self.use_bias:
      bias = self.param(
          "bias",
          nn.with_logical_partitioning(nn.initializers.zeros,
                                       tuple(self.kernel_axes[self.contract_dims:])),
          features, jnp.float32)
      y = y + bias.astype(self.dtype)
    return y
