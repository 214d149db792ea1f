"""ELMo's LSTM: a cell with a projected state, run over time with `jax.lax.scan`.

One step (gate order i, f, g, o, as torch.nn.LSTM):
  i, f, g, o = x_t W_x + h_{t-1} W_h + b          (W_x [in, 4, cell], W_h [proj, 4, cell])
  c_t = sigmoid(f) * c_{t-1} + sigmoid(i) * tanh(g)       clipped to +-cell_clip
  h_t = (sigmoid(o) * tanh(c_t)) W_p                      [cell] -> [proj], clipped to +-proj_clip
This is torch.nn.LSTM(proj_size=...) with one bias (torch's b_ih + b_hh) plus the
released model's clipping (cell_clip = proj_clip = 3). The input term is computed for
all steps at once before the scan; only the recurrent term runs step by step.

Padding (mask 0) keeps the state unchanged and outputs zeros, so a right-padded row
run backwards starts fresh at its last real word.

`BiLstmStack` runs separate forward and backward stacks (each layer of a direction
reads the layer below *of the same direction*) with a residual connection around
every layer but the first, as the released ELMo.
"""
from typing import Optional

import flax.linen as nn
import jax
import jax.numpy as jnp

GATES = 4
FORGET = 1  # index of the forget gate


def _bias_init(key, shape, dtype=jnp.float32):
  """Zeros, with the forget gate at 1 (bilm-tf's forget_bias)."""
  del key
  return jnp.zeros(shape, dtype).at[FORGET].set(1.0)


def _clip(x: jax.Array, bound: Optional[float]) -> jax.Array:
  return x if bound is None else jnp.clip(x, -bound, bound)


class LstmWithProjection(nn.Module):
  """One direction of one layer: [B, L, in] -> [B, L, proj]."""
  cell_size: int
  projection_dim: int
  cell_clip: Optional[float] = None
  proj_clip: Optional[float] = None
  reverse: bool = False
  init_std: float = 0.02
  dtype: jnp.dtype = jnp.float32

  @nn.compact
  def __call__(self, x: jax.Array, mask: jax.Array) -> jax.Array:
    param = lambda name, init, shape, axes: self.param(
        name, nn.with_logical_partitioning(init, axes), shape, jnp.float32)
    normal = nn.initializers.normal(self.init_std)
    w_x = param("input_kernel", normal, (x.shape[-1], GATES, self.cell_size),
                ("embed", "gates", "mlp"))
    w_h = param("recurrent_kernel", normal, (self.projection_dim, GATES, self.cell_size),
                ("embed", "gates", "mlp"))
    bias = param("bias", _bias_init, (GATES, self.cell_size), ("gates", "mlp"))
    w_p = param("projection_kernel", normal, (self.cell_size, self.projection_dim),
                ("mlp", "embed"))
    w_h, w_p = w_h.astype(self.dtype), w_p.astype(self.dtype)

    inputs = jnp.einsum("bli,igc->blgc", x.astype(self.dtype), w_x.astype(self.dtype))
    inputs = inputs + bias.astype(self.dtype)
    inputs = nn.with_logical_constraint(inputs, ("batch", "length", "gates", "mlp"))
    batch = x.shape[0]

    def step(carry, xs):
      cell, hidden = carry
      gates_in, real = xs
      gates = gates_in + jnp.einsum("bp,pgc->bgc", hidden, w_h)
      i, f, g, o = (gates[:, k] for k in range(GATES))
      new_cell = _clip(jax.nn.sigmoid(f) * cell + jax.nn.sigmoid(i) * jnp.tanh(g),
                       self.cell_clip)
      new_hidden = _clip((jax.nn.sigmoid(o) * jnp.tanh(new_cell)) @ w_p, self.proj_clip)
      real = real[:, None]
      cell = jnp.where(real, new_cell, cell)
      hidden = jnp.where(real, new_hidden, hidden)
      return (cell, hidden), jnp.where(real, new_hidden, 0.0)

    carry = (jnp.zeros((batch, self.cell_size), self.dtype),
             jnp.zeros((batch, self.projection_dim), self.dtype))
    time_major = (jnp.swapaxes(inputs, 0, 1), jnp.swapaxes(mask.astype(bool), 0, 1))
    _, outputs = jax.lax.scan(step, carry, time_major, reverse=self.reverse)
    return nn.with_logical_constraint(jnp.swapaxes(outputs, 0, 1), ("batch", "length", "embed"))


class BiLstmStack(nn.Module):
  """Forward and backward stacks: [B, L, P] -> per layer ([B, L, P] fwd, [B, L, P] bwd)."""
  num_layers: int
  cell_size: int
  projection_dim: int
  cell_clip: Optional[float] = None
  proj_clip: Optional[float] = None
  dropout_rate: float = 0.0
  init_std: float = 0.02
  dtype: jnp.dtype = jnp.float32

  @nn.compact
  def __call__(self, x: jax.Array, mask: jax.Array, *,
               deterministic: bool = True) -> list[tuple[jax.Array, jax.Array]]:
    layers, inputs = [], {"forward": x, "backward": x}
    for layer in range(self.num_layers):
      outputs = {}
      for direction in ("forward", "backward"):
        lstm = LstmWithProjection(self.cell_size, self.projection_dim, self.cell_clip,
                                  self.proj_clip, reverse=direction == "backward",
                                  init_std=self.init_std, dtype=self.dtype,
                                  name=f"{direction}_{layer}")
        out = lstm(inputs[direction], mask)
        if layer:  # the residual connection, around every layer but the first
          out = out + inputs[direction]
        outputs[direction] = out
      layers.append((outputs["forward"], outputs["backward"]))
      inputs = {k: nn.Dropout(self.dropout_rate)(v, deterministic=deterministic)
                for k, v in outputs.items()}
    return layers
