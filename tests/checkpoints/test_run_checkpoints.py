"""Params checkpoints, run checkpoints (keep-last-N + best, half-written steps), and
bit-exact resume after SIGKILL."""
import json
import os
import random
import signal
import time

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bertjax import checkpoints
from tests.helpers import trainer as tl


def test_save_and_load_params_round_trip(tmp_path):
  boxed = {"dense": {"kernel": nn.LogicallyPartitioned(jnp.arange(6.0).reshape(2, 3),
                                                       ("embed", "mlp")),
                     "bias": jnp.ones(3, jnp.bfloat16)}}
  checkpoints.save_params(str(tmp_path), boxed, {"family": "bert", "config": {"hidden": 3}})
  checkpoints.save_params(str(tmp_path), boxed, {"family": "bert", "config": {"hidden": 4}})
  params, meta = checkpoints.load_params(str(tmp_path))
  assert meta == {"family": "bert", "config": {"hidden": 4}}  # overwritten in place
  assert isinstance(params["dense"]["kernel"], np.ndarray)
  np.testing.assert_array_equal(params["dense"]["kernel"], np.arange(6.0).reshape(2, 3))
  assert params["dense"]["bias"].dtype == jnp.bfloat16


def test_load_params_explains_what_it_expected(tmp_path):
  with pytest.raises(FileNotFoundError, match="No checkpoint directory"):
    checkpoints.load_params(str(tmp_path / "missing"))
  with pytest.raises(FileNotFoundError, match="neither a params checkpoint"):
    checkpoints.load_params(str(tmp_path))


def _state(value):
  return {"params": {"w": jnp.full((4,), value, jnp.float32)}, "step": jnp.asarray(value)}


def test_keeps_last_n_plus_best_and_ignores_half_written_steps(tmp_path):
  run = checkpoints.RunCheckpoints(str(tmp_path), keep=2, best_metric="accuracy")
  accuracy = {1: 0.1, 2: 0.9, 3: 0.2, 4: 0.3, 5: 0.4, 6: 0.5}
  for step, acc in accuracy.items():
    run.save(step, _state(step), {"batches_consumed": step}, metrics={"accuracy": acc})
  run.close()
  assert sorted(run.all_steps()) == [2, 5, 6]

  # A save killed half-way leaves an uncommitted temporary folder: never the latest.
  partial = tmp_path / "checkpoints" / "9.orbax-checkpoint-tmp-1234567"
  (partial / "state").mkdir(parents=True)
  (partial / "state" / "junk").write_text("half written")
  run = checkpoints.RunCheckpoints(str(tmp_path), keep=2, best_metric="accuracy")
  assert run.latest_step() == 6
  target = jax.eval_shape(lambda: _state(0))
  state, extra = run.restore(6, target)
  np.testing.assert_array_equal(state["params"]["w"], np.full(4, 6.0))
  assert extra == {"batches_consumed": 6}
  params, meta = checkpoints.load_params(str(tmp_path))
  assert meta["step"] == 6 and float(params["w"][0]) == 6.0
  run.close()


def test_one_process_saves_replicated_arrays_whole_without_compiling(tmp_path):
  # Orbax's replica-parallel default would slice each array replicated over the 8 test
  # devices into 8 parts, compiling a slice program for each.
  from jax.sharding import NamedSharding, PartitionSpec
  replicated = NamedSharding(jax.make_mesh((jax.device_count(),), ("data",)), PartitionSpec())
  rng = np.random.default_rng(0)
  shapes = [(16, 24), (24,), (40, 16), (8, 8, 8)]
  state = {f"w{i}": jax.device_put(rng.normal(size=s).astype(np.float32), replicated)
           for i, s in enumerate(shapes)}
  compiles = []

  def count(event, secs, **kwargs):
    if event == "/jax/core/compile/backend_compile_duration":
      compiles.append(secs)
  jax.monitoring.register_event_duration_secs_listener(count)
  try:
    run = checkpoints.RunCheckpoints(str(tmp_path), async_save=False)
    run.save(1, state, {"batches_consumed": 1})
    run.close()
  finally:
    jax.monitoring.unregister_event_duration_listener(count)
  assert jax.device_count() == 8 and compiles == []
  target = {k: jax.ShapeDtypeStruct(v.shape, v.dtype, sharding=v.sharding)
            for k, v in state.items()}
  restored, _ = run.restore(1, target)
  for name, value in state.items():
    np.testing.assert_array_equal(restored[name], np.asarray(value))


def _wait_for_step(model_dir, step, proc, timeout=300):
  path = os.path.join(model_dir, "metrics.jsonl")
  deadline = time.time() + timeout
  while time.time() < deadline and proc.poll() is None:
    if os.path.exists(path):
      with open(path) as f:
        steps = [json.loads(line)["step"] for line in f if line.strip()]
      if steps and max(steps) >= step:
        return max(steps)
    time.sleep(0.01)
  raise AssertionError(f"run never reached step {step}: {proc.communicate()[0][-3000:]}")


@pytest.mark.slow
def test_sigkilled_run_resumes_bit_identical(tmp_path):
  # The kill comes between steps 7 and 30 of 100: the margin is wide enough that the
  # watcher, which polls the metrics file, cannot miss the window on a loaded machine
  # (with 40 steps, a tiny run sometimes finished before the watcher read step 30).
  total = 100
  gin_file = tl.write_gin(str(tmp_path / "run.gin"), [
      f"Trainer.num_train_steps = {total}", "Trainer.log_every = 1",
      "Trainer.checkpoint_every = 3", "warmup_linear_decay.warmup_steps = 10"])
  reference = tl.popen_main(gin_file, str(tmp_path / "reference"))
  interrupted = tl.popen_main(gin_file, str(tmp_path / "interrupted"))
  # From step 7 on, the step-3 checkpoint has been sealed (a kill at step 4 could find
  # it committed but not yet sealed, leaving nothing to resume from).
  kill_at = random.Random().randint(7, 30)
  reached = _wait_for_step(str(tmp_path / "interrupted"), kill_at, interrupted)
  interrupted.send_signal(signal.SIGKILL)
  interrupted.communicate()
  assert interrupted.returncode == -signal.SIGKILL
  # (A step committed but not yet sealed when the kill came is not intact.)
  resumed_from = checkpoints.RunCheckpoints(str(tmp_path / "interrupted")).newest_intact_step()
  assert resumed_from is not None and resumed_from < total, (reached, resumed_from)

  restarted = tl.popen_main(gin_file, str(tmp_path / "interrupted"))
  out, _ = restarted.communicate(timeout=600)
  assert restarted.returncode == 0, out[-3000:]
  assert f"Resumed from step {resumed_from}" in out
  out, _ = reference.communicate(timeout=600)
  assert reference.returncode == 0, out[-3000:]

  expected, meta_a = checkpoints.load_params(str(tmp_path / "reference"))
  actual, meta_b = checkpoints.load_params(str(tmp_path / "interrupted"))
  assert meta_a["step"] == meta_b["step"] == total
  for (path, a), b in zip(jax.tree_util.tree_leaves_with_path(expected), jax.tree.leaves(actual)):
    np.testing.assert_array_equal(a, b, err_msg=f"{jax.tree_util.keystr(path)} "
                                  f"(killed near step {reached}, resumed from {resumed_from})")
