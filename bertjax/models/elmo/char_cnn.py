"""ELMo's context-independent word representation: a character CNN.

  char ids [B, L, C] -> char embeddings [B, L, C, E]
    -> per filter width w: a width-w convolution over the C characters (valid
       padding), max over positions, ReLU                        (Kim et al., 2016)
    -> the filters concatenated [B, L, F] -> highway layers -> a linear projection [B, L, P]

A highway layer (Srivastava et al., 2015) carries part of its input through:
  y = g * x + (1 - g) * relu(x W_h + b_h),   g = sigmoid(x W_g + b_g)
(g is the carry gate, AllenNLP's convention; bilm-tf's transform gate is 1 - g).
The gate bias starts at 1, so the layer starts close to carrying x through.
"""
from typing import Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp

from bertjax.layers.dense import DenseGeneral
from bertjax.layers.embeddings import Embed


class Highway(nn.Module):
  """One highway layer over the concatenated filters."""
  init_std: float = 0.02
  dtype: jnp.dtype = jnp.float32

  @nn.compact
  def __call__(self, x: jax.Array) -> jax.Array:
    width = x.shape[-1]
    dense = lambda name: DenseGeneral(width, ("filters", "filters_out"), init_std=self.init_std,
                                      dtype=self.dtype, name=name)
    nonlinear = jax.nn.relu(dense("nonlinear")(x))
    gate_bias = self.param("gate_bias", nn.with_logical_partitioning(nn.initializers.ones,
                                                                     ("filters_out",)),
                           (width,), jnp.float32)
    gate_layer = DenseGeneral(width, ("filters", "filters_out"), use_bias=False,
                              init_std=self.init_std, dtype=self.dtype, name="gate")
    gate = jax.nn.sigmoid(gate_layer(x) + gate_bias.astype(self.dtype))
    return gate * x + (1.0 - gate) * nonlinear


class CharacterEncoder(nn.Module):
  """char ids [B, L, C] -> word vectors [B, L, projection_dim] (see module doc)."""
  char_vocab_size: int
  char_embed_dim: int
  filters: Sequence[tuple[int, int]]  # (width, number of filters)
  num_highway: int
  projection_dim: int
  init_std: float = 0.02
  dtype: jnp.dtype = jnp.float32

  @nn.compact
  def __call__(self, char_ids: jax.Array) -> jax.Array:
    batch, length, chars = char_ids.shape
    table = Embed(self.char_vocab_size, self.char_embed_dim, axes=("char_vocab", "char_embed"),
                  init_std=1.0, dtype=self.dtype, name="char_embeddings")
    x = table(char_ids.reshape(batch * length, chars))  # [B * L, C, E]
    pooled = []
    for i, (width, number) in enumerate(self.filters):
      kernel = self.param(f"conv_{i}_kernel", nn.with_logical_partitioning(
          nn.initializers.normal(self.init_std), ("conv_width", "char_embed", "filters")),
                          (width, self.char_embed_dim, number), jnp.float32)
      bias = self.param(f"conv_{i}_bias", nn.with_logical_partitioning(
          nn.initializers.zeros, ("filters",)), (number,), jnp.float32)
      y = jax.lax.conv_general_dilated(x, kernel.astype(self.dtype), window_strides=(1,),
                                       padding="VALID", dimension_numbers=("NWC", "WIO", "NWC"))
      pooled.append(jax.nn.relu(y.max(axis=1) + bias.astype(self.dtype)))  # [B * L, number]
    x = jnp.concatenate(pooled, axis=-1)
    x = nn.with_logical_constraint(x.reshape(batch, length, -1), ("batch", "length", "filters"))
    for i in range(self.num_highway):
      x = Highway(self.init_std, self.dtype, name=f"highway_{i}")(x)
    x = DenseGeneral(self.projection_dim, ("filters", "embed"), init_std=self.init_std,
                     dtype=self.dtype, name="projection")(x)
    return nn.with_logical_constraint(x, ("batch", "length", "embed"))
