"""Times one sharded train step: shared by the throughput benchmarks."""
import time

import jax

from bertjax.train import setup as train_setup, step as train_step


class TrainStep:
  """The trainer's jitted, sharded step for `model` on `objective` (`train.setup`), with its
  state and `batch` already on the mesh: `run(n)` takes n steps and waits for them.

  An objective that carries state between steps (XLNet's memory) gets it fed from
  one step to the next, as in the trainer.
  """

  def __init__(self, model, objective, tx, schedule, batch, mesh, rules):
    setup = train_setup.build(model, batch, objective.model_inputs, (tx, schedule), mesh, rules)
    self.params = setup.abstract_state.params
    self.state = setup.new_state(0)
    batch_sharding = setup.batch_sharding
    self.carry = ()
    if train_step.carries_state(objective):
      batch_size = len(next(iter(batch.values())))
      self.carry = (jax.device_put(objective.initial_carry(model, batch_size), batch_sharding),)
    self.step = setup.jit_train_step(model, objective)
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
