"""The pure train and eval steps: (state, batch) -> (state, metrics).

Gradient accumulation runs microbatches through `lax.scan`, summing float32
gradients and `(sum, count)` metrics; the loss that is differentiated is the mean of
the microbatch losses. Microbatch i takes rows i, i+n, i+2n... of the global batch:
with the batch split over `data` in contiguous blocks, that keeps every device's
rows on that device (no resharding per microbatch).

A step whose loss or gradient norm is not finite, or whose update would make a
parameter non-finite (an exploding learning rate can overflow the params while the
loss that led there was still finite), leaves params and optimizer state unchanged
(the step counter still advances: the batch was consumed) and reports
`nonfinite = 1`; the loop (`train.loop`) then stops or carries on, as configured.
So the state never holds a non-finite parameter.

Carried state: an objective that defines `initial_carry(model, batch_size)` and
`next_carry(outputs, batch)` (XLNet's memory) gets a step `(state, batch, carry) ->
(state, metrics, carry)`: the carry's arrays join the batch (batch-major, so they split
into microbatches like any feature) and the next step receives what `next_carry`
returned for this one. A non-finite step keeps the old carry.

Every step also reports how full its rows are (`fill_metrics`): `packing_efficiency`,
real tokens / token slots of the batch (and `decoder_packing_efficiency` for the
targets of an encoder-decoder batch). Summed over steps like every metric, a logged
row's value is real tokens / slots over its steps: for a packed recipe how well the
packer filled its rows, for a padded one the share of compute not spent on padding.
"""
from typing import Any, Callable

import jax
import jax.numpy as jnp
import optax
from jax.sharding import PartitionSpec

from bertjax.train.state import TrainState

Batch = dict[str, jax.Array]


def _rngs(key: jax.Array, objective) -> dict[str, jax.Array]:
  names = ("dropout",) + tuple(objective.rng_names)
  return {name: jax.random.fold_in(key, i) for i, name in enumerate(names)}


def _split_microbatches(batch: Batch, n: int) -> Batch:
  def split(x):
    if x.shape[0] % n:
      raise ValueError(f"Batch size {x.shape[0]} is not divisible by num_microbatches={n}.")
    x = x.reshape((x.shape[0] // n, n) + x.shape[1:]).swapaxes(0, 1)
    # Rows stay where they were: dimension 1 keeps the batch's data-axis sharding.
    return jax.lax.with_sharding_constraint(
        x, PartitionSpec(None, *_batch_spec(x.ndim - 1))) if _has_mesh() else x
  return jax.tree.map(split, batch)


def _has_mesh() -> bool:
  return not jax.sharding.get_abstract_mesh().empty


def _batch_spec(ndim: int) -> tuple:
  """The spec of a batch feature: leading dim over the mesh's `data` axis if it has one."""
  mesh = jax.sharding.get_abstract_mesh()
  lead = "data" if "data" in mesh.axis_names else None
  return (lead,) + (None,) * (ndim - 1)


def _all_finite(tree) -> jax.Array:
  """Whether every element is finite (a norm would overflow on large finite values)."""
  return jnp.stack([jnp.isfinite(x).all() for x in jax.tree.leaves(tree)]).all()


# Real-token masks a batch may hold, and the metric each one's fill is reported as.
FILL_MASKS = {"attention_mask": "packing_efficiency",
              "decoder_attention_mask": "decoder_packing_efficiency"}


def fill_metrics(batch: Batch) -> dict[str, tuple[jax.Array, jax.Array]]:
  """{metric: (real tokens, slots)} for each real-token mask in `batch` (`FILL_MASKS`);
  a batch without an attention_mask but with segment_ids (0 = padding) counts those."""
  masks = {name: batch[key] for key, name in FILL_MASKS.items() if key in batch}
  if "packing_efficiency" not in masks and "segment_ids" in batch:
    masks["packing_efficiency"] = batch["segment_ids"]
  return {name: (jnp.sum(mask > 0, dtype=jnp.float32), jnp.asarray(mask.size, jnp.float32))
          for name, mask in masks.items()}


def carries_state(objective) -> bool:
  """Whether `objective` carries state from one train step to the next (module docstring)."""
  return hasattr(objective, "initial_carry") and hasattr(objective, "next_carry")


def _merge_microbatches(x: jax.Array) -> jax.Array:
  """Inverse of `_split_microbatches`: [n, B / n, ...] -> [B, ...] in the original row order."""
  return x.swapaxes(0, 1).reshape((x.shape[0] * x.shape[1],) + x.shape[2:])


def make_train_step(model, objective, tx: optax.GradientTransformation,
                    schedule: Callable[[jax.Array], jax.Array],
                    num_microbatches: int = 1) -> Callable[[TrainState, Batch], tuple]:
  """Builds the (unjitted) train step for `model` trained on `objective`."""
  carried = carries_state(objective)

  def loss_fn(params, batch, key):
    outputs = model.apply({"params": params}, **objective.model_inputs(batch),
                          deterministic=False, rngs=_rngs(key, objective))
    loss, metrics = objective(outputs, batch)
    return loss, (metrics, objective.next_carry(outputs, batch) if carried else {})

  grad_fn = jax.value_and_grad(loss_fn, has_aux=True)

  def step(state: TrainState, batch: Batch, carry: Batch | None = None):
    key = jax.random.fold_in(state.key, state.step)
    fill = fill_metrics(batch)
    if carried:
      batch = {**batch, **carry}
    if num_microbatches == 1:
      (loss, (metrics, new_carry)), grads = grad_fn(state.params, batch, key)
    else:
      micro = _split_microbatches(batch, num_microbatches)

      def body(carry, inputs):
        index, mb = inputs
        (l, (m, c)), g = grad_fn(state.params, mb, jax.random.fold_in(key, index))
        g_sum, l_sum, m_sum = carry
        g_sum = jax.tree.map(lambda a, b: a + b.astype(jnp.float32), g_sum, g)
        m_sum = jax.tree.map(jnp.add, m_sum, m)
        return (g_sum, l_sum + l, m_sum), c

      zeros = jax.tree.map(lambda p: jnp.zeros(p.shape, jnp.float32), state.params)
      first = jax.tree.map(lambda x: x[0], micro)
      _, (m_shape, _) = jax.eval_shape(loss_fn, state.params, first, key)
      m_zero = jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), m_shape)
      (grads, loss, metrics), new_carry = jax.lax.scan(
          body, (zeros, jnp.zeros((), jnp.float32), m_zero),
          (jnp.arange(num_microbatches), micro))
      grads = jax.tree.map(lambda g: g / num_microbatches, grads)
      loss = loss / num_microbatches
      new_carry = jax.tree.map(_merge_microbatches, new_carry)

    grad_norm = optax.global_norm(grads)
    updates, new_opt_state = tx.update(grads, state.opt_state, state.params)
    new_params = optax.apply_updates(state.params, updates)
    finite = jnp.isfinite(loss) & jnp.isfinite(grad_norm) & _all_finite(new_params)
    keep = lambda new, old: jax.tree.map(lambda a, b: jnp.where(finite, a, b), new, old)
    new_state = state.replace(step=state.step + 1,
                              params=keep(new_params, state.params),
                              opt_state=keep(new_opt_state, state.opt_state))
    one = jnp.ones((), jnp.float32)
    metrics = {**metrics, **fill}
    metrics.update({
        "loss": (loss, one),
        "grad_norm": (grad_norm, one),
        "learning_rate": (jnp.asarray(schedule(state.step), jnp.float32), one),
        "nonfinite": (1.0 - finite.astype(jnp.float32), one),
    })
    if carried:
      return new_state, metrics, keep(new_carry, carry)
    return new_state, metrics

  return step


def make_eval_step(model, objective) -> Callable[[Any, Batch], dict]:
  """params, batch -> {name: (sum, count)}, with `loss` weighted by example count."""

  def step(params, batch: Batch):
    outputs = model.apply({"params": params}, **objective.model_inputs(batch),
                          deterministic=True)
    loss, metrics = objective(outputs, batch)
    metrics = dict(metrics)
    metrics["loss"] = (loss, jnp.ones((), jnp.float32))
    return metrics

  return step
