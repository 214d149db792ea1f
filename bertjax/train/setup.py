"""What every training run builds before its first step: the mesh, the optimizer's train
state laid out on it, and the steps jitted over that layout.

Pretraining (`train.trainer`), fine-tuning (`finetune.loop`) and SBERT training
(`sbert.train`) all call `build`, so all three shard the same way: parameters and
optimizer moments as their logical axes and the rules say (`train.state`,
`train.partitioning`), the batch split over `data`, the step donating the old state.

    mesh = setup.data_parallel_mesh(batch_size // num_microbatches)  # or make_mesh() (gin)
    run = setup.build(model, example_batch, objective.model_inputs,
                      optimizers.make_optimizer(total_steps), mesh, rules)
    state = run.new_state(seed)             # or restore into run.restore_target()
    step = run.jit_train_step(model, objective, num_microbatches)
"""
import dataclasses
from typing import Any, Callable, Mapping

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.sharding import Mesh, NamedSharding

from bertjax.train import optimizers, partitioning, state as train_state, step as train_step


def data_parallel_mesh(*rows: int) -> Mesh:
  """Data parallel over the most devices that evenly split every one of `rows` (the rows
  of a train microbatch, of an eval batch): a run that is not given a mesh."""
  devices = jax.devices()
  count = max(d for d in range(1, len(devices) + 1)
              if len(devices) % d == 0 and all(r % d == 0 for r in rows))
  return partitioning.make_mesh((count, 1), devices=devices[:count])


@dataclasses.dataclass(frozen=True)
class TrainSetup:
  """A model's train state on a mesh: its layout, and how to make, restore and step it.

  Attributes:
    mesh, rules: the devices and the logical -> mesh axis rules.
    tx, schedule: the update rule and its learning-rate schedule
      (`optimizers.make_optimizer`).
    init_fn: rng -> boxed params, for the model called on `example`.
    example: one row of zeros shaped like the example batch (shapes only).
    abstract_state: the TrainState's shapes and dtypes.
    state_shardings: a TrainState of NamedShardings, the state's layout.
  """
  mesh: Mesh
  rules: tuple
  tx: optax.GradientTransformation
  schedule: optimizers.Schedule
  init_fn: Callable
  example: dict
  abstract_state: train_state.TrainState
  state_shardings: train_state.TrainState

  @property
  def batch_sharding(self) -> NamedSharding:
    return partitioning.batch_sharding(self.mesh, self.rules)

  def init_params(self, seed: int) -> Any:
    """The model's random init for key(seed), unboxed: the fresh parameters that pretrained
    ones are merged into (`train_state.merge_pretrained`)."""
    return nn.unbox(jax.jit(self.init_fn)(jax.random.key(seed)))

  def new_state(self, seed: int, params: Any = None) -> train_state.TrainState:
    """A fresh state on the mesh; `params` (host arrays) replace the random init."""
    return train_state.create_state(self.init_fn, self.tx, seed, self.state_shardings, params)

  def restore_target(self) -> Any:
    """The state as ShapeDtypeStructs with their shardings: what a checkpoint restores into."""
    return jax.tree.map(lambda a, s: jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=s),
                        self.abstract_state, self.state_shardings)

  def jit_train_step(self, model, objective, num_microbatches: int = 1) -> Callable:
    """`train.step`'s step for `model` on `objective`, jitted over this layout; it donates
    the state (and the carry of an objective that carries one, laid out like the batch)."""
    step = train_step.make_train_step(model, objective, self.tx, self.schedule,
                                      num_microbatches)
    carry = (self.batch_sharding,) if train_step.carries_state(objective) else ()
    return partitioning.jit_sharded(
        step, self.mesh, self.rules,
        in_shardings=(self.state_shardings, self.batch_sharding) + carry,
        out_shardings=(self.state_shardings, partitioning.replicated(self.mesh)) + carry,
        donate_argnums=(0, 2) if carry else (0,))

  def jit_on_params(self, fn: Callable) -> Callable:
    """`fn(params, batch)` (an eval step) jitted over this layout; its result replicated."""
    return partitioning.jit_sharded(
        fn, self.mesh, self.rules, in_shardings=(self.state_shardings.params,
                                                 self.batch_sharding),
        out_shardings=partitioning.replicated(self.mesh))


def build(model: nn.Module, example: Mapping[str, Any], model_inputs: Callable,
          optimizer: tuple[optax.GradientTransformation, optimizers.Schedule], mesh: Mesh,
          rules: partitioning.LogicalRules) -> TrainSetup:
  """The layout of `model`'s train state under `optimizer` (`(tx, schedule)`, as
  `optimizers.make_optimizer` returns it) on `mesh` by `rules`, from the shapes of
  `example` (a batch; only its first row's shapes are used)."""
  example = {k: jnp.asarray(np.zeros((1,) + np.shape(v)[1:], np.asarray(v).dtype))
             for k, v in example.items()}
  tx, schedule = optimizer
  init_fn = train_state.init_params_fn(model, example, model_inputs)
  abstract, shardings = train_state.state_shardings(
      jax.eval_shape(init_fn, jax.random.key(0)), tx, mesh, rules)
  return TrainSetup(mesh=mesh, rules=tuple(rules), tx=tx, schedule=schedule, init_fn=init_fn,
                    example=example, abstract_state=abstract, state_shardings=shardings)
