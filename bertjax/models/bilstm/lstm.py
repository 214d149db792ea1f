"""A one-direction LSTM layer over padded batches (Hochreiter & Schmidhuber, 1997).

Written out rather than taken from flax.linen's cells so every parameter carries
logical axis names and the input projection of all time steps is one matmul before
the recurrence (`lax.scan` then does only the [B, H] x [H, 4H] product per step).

Gates are ordered (input, forget, cell, output) as in torch.nn.LSTM, with one bias
(torch's b_ih + b_hh), so a torch LSTM's weights map onto these by a reshape
(`tests/models/test_bilstm.py` checks the outputs against torch.nn.LSTM):
  i, f, g, o = sigmoid(.), sigmoid(.), tanh(.), sigmoid(.) of x W_x + h W_h + b
  c' = f * c + i * g;  h' = o * tanh(c')
Padding: where `mask` is 0 the state is carried over unchanged and the output is 0.
Run with `reverse=True` over right-padded rows, the recurrence meets the padding first
(state still zero) and then the words last to first, so the backward direction starts
at each row's own last word, as packing the sequences would.
"""
import flax.linen as nn
import jax
import jax.numpy as jnp

GATES = 4
# Logical axis names: the LSTM's own dimensions are not in the default sharding rules
# (replicated): a single LSTM layer is small, and sharding its hidden units would add
# a collective to every time step.
INPUT_KERNEL_AXES = ("embed", "gates", "lstm_hidden")
RECURRENT_KERNEL_AXES = ("lstm_hidden_in", "gates", "lstm_hidden")
BIAS_AXES = ("gates", "lstm_hidden")


def _recurrent_init(key, shape, dtype=jnp.float32):
  """Orthogonal [H, 4H] (the usual choice for recurrent weights), as [H, 4, H]."""
  flat = nn.initializers.orthogonal()(key, (shape[0], shape[1] * shape[2]), dtype)
  return flat.reshape(shape)


def _bias_init(key, shape, dtype=jnp.float32):
  """Zeros, forget gate 1: the cell starts out remembering (Jozefowicz et al., 2015)."""
  del key
  return jnp.zeros(shape, dtype).at[1].set(1.0)


class LSTM(nn.Module):
  """One direction: (x [B, L, E], mask [B, L]) -> (outputs [B, L, H], final h [B, H])."""
  hidden_size: int
  reverse: bool = False

  @nn.compact
  def __call__(self, x: jax.Array, mask: jax.Array) -> tuple[jax.Array, jax.Array]:
    hidden = self.hidden_size
    w_x = self.param("input_kernel", nn.with_logical_partitioning(
        nn.initializers.glorot_uniform(in_axis=0, out_axis=(1, 2)), INPUT_KERNEL_AXES),
        (x.shape[-1], GATES, hidden))
    w_h = self.param("recurrent_kernel", nn.with_logical_partitioning(
        _recurrent_init, RECURRENT_KERNEL_AXES), (hidden, GATES, hidden))
    bias = self.param("bias", nn.with_logical_partitioning(_bias_init, BIAS_AXES),
                      (GATES, hidden))
    projected = jnp.einsum("ble,egh->lbgh", x.astype(jnp.float32), w_x) + bias  # time-major
    keep = mask.astype(bool).T[..., None]  # [L, B, 1]

    def step(carry, inputs):
      h, c = carry
      gates_x, keep_t = inputs
      gates = gates_x + jnp.einsum("bh,hgk->bgk", h, w_h)
      i, f, g, o = (gates[:, k] for k in range(GATES))
      c_new = jax.nn.sigmoid(f) * c + jax.nn.sigmoid(i) * jnp.tanh(g)
      h_new = jax.nn.sigmoid(o) * jnp.tanh(c_new)
      h, c = jnp.where(keep_t, h_new, h), jnp.where(keep_t, c_new, c)
      return (h, c), jnp.where(keep_t, h_new, 0.0)

    zeros = jnp.zeros((x.shape[0], hidden), jnp.float32)
    (h, _), outputs = jax.lax.scan(step, (zeros, zeros), (projected, keep), reverse=self.reverse)
    return outputs.swapaxes(0, 1), h
