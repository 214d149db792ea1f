"""Times one sharded train step: shared by the throughput benchmarks."""
import time

import jax

from bertjax.train import partitioning, state as train_state, step as train_step


class TrainStep:
  """The trainer's jitted, sharded step for `model` on `objective`, with its state and
  `batch` already on the mesh: `run(n)` takes n steps and waits for them.

  An objective that carries state between steps (XLNet's memory) gets it fed from
  one step to the next, as in the trainer.
  """

  def __init__(self, model, objective, tx, schedule, batch, mesh, rules):
    init_fn = train_state.init_params_fn(model, {k: v[:1] for k, v in batch.items()},
                                         objective.model_inputs)
    abstract, shardings = train_state.state_shardings(jax.eval_shape(init_fn, jax.random.key(0)),
                                                      tx, mesh, rules)
    self.params = abstract.params
    self.state = train_state.create_state(init_fn, tx, 0, shardings)
    batch_sharding = partitioning.batch_sharding(mesh, rules)
    self.carry = ()
    if train_step.carries_state(objective):
      batch_size = len(next(iter(batch.values())))
      self.carry = (jax.device_put(objective.initial_carry(model, batch_size), batch_sharding),)
    extra = (batch_sharding,) * len(self.carry)
    self.step = partitioning.jit_sharded(
        train_step.make_train_step(model, objective, tx, schedule), mesh, rules,
        in_shardings=(shardings, batch_sharding) + extra, out_shardings=(shardings, None) + extra,
        donate_argnums=(0, 2) if self.carry else (0,))
    self.batch = jax.device_put(batch, batch_sharding)

  def run(self, steps: int = 1) -> None:
    for _ in range(steps):
      self.state, metrics, *carry = self.step(self.state, self.batch, *self.carry)
      self.carry = tuple(carry)
    jax.block_until_ready(metrics)


def time_train_step(model, objective, tx, schedule, batch, steps, mesh, rules):
  """Builds the state for `batch`, compiles the step, and times `steps` more of them.

  Returns (abstract params, seconds per step, compile seconds).
  """
  train = TrainStep(model, objective, tx, schedule, batch, mesh, rules)
  start = time.perf_counter()
  train.run(1)
  compile_s = time.perf_counter() - start
  start = time.perf_counter()
  train.run(steps)
  return train.params, (time.perf_counter() - start) / steps, compile_s
