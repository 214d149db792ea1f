"""Times one sharded train step: shared by the throughput benchmarks."""
import time

import jax

from bertjax import partitioning, train_state, train_step


def time_train_step(model, objective, tx, schedule, batch, steps, mesh, rules):
  """Builds the state for `batch`, compiles the step, and times `steps` more of them.

  Returns (abstract params, seconds per step, compile seconds).
  """
  init_fn = train_state.init_params_fn(model, {k: v[:1] for k, v in batch.items()},
                                       objective.model_inputs)
  abstract, shardings = train_state.state_shardings(jax.eval_shape(init_fn, jax.random.key(0)),
                                                    tx, mesh, rules)
  state = train_state.create_state(init_fn, tx, 0, shardings)
  batch_sharding = partitioning.batch_sharding(mesh, rules)
  step = partitioning.jit_sharded(
      train_step.make_train_step(model, objective, tx, schedule), mesh, rules,
      in_shardings=(shardings, batch_sharding), out_shardings=(shardings, None),
      donate_argnums=(0,))
  device_batch = jax.device_put(batch, batch_sharding)
  start = time.perf_counter()
  state, metrics = step(state, device_batch)
  jax.block_until_ready(metrics)
  compile_s = time.perf_counter() - start
  start = time.perf_counter()
  for _ in range(steps):
    state, metrics = step(state, device_batch)
  jax.block_until_ready(metrics)
  return abstract.params, (time.perf_counter() - start) / steps, compile_s
