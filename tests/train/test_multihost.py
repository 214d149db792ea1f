"""Multi-process training on 127.0.0.1: N joined CPU processes == one process.

Every run is `python -m bertjax.main` in subprocesses (jax.distributed + gloo), the
tiny BERT of the trainer tests on a 2 x 2 (data x model) mesh, 6 steps with a
checkpoint at step 3. The reference is one process with 4 devices and the same
global batch; N processes must give the same losses and final parameters, and a
checkpoint written by 2 processes must continue in 1 (and vice versa) exactly as
the uninterrupted run does.
"""
import json
import os
import re
import subprocess

import jax
import numpy as np
import pytest

from bertjax import checkpoints
from bertjax.train import distributed, partitioning, inputs as train_inputs
from tests.helpers import multihost as ml
from tests.helpers import trainer as tl

RTOL, ATOL = 1e-5, 1e-6


@pytest.fixture(scope="module")
def gin_file(tmp_path_factory):
  return tl.write_gin(str(tmp_path_factory.mktemp("gin") / "run.gin"), ml.MESH_RUN)


@pytest.fixture(scope="module")
def one_process(gin_file, tmp_path_factory):
  model_dir = str(tmp_path_factory.mktemp("one") / "run")
  ml.run_processes(1, 4, gin_file, model_dir, mode="train_and_evaluate")
  return model_dir


@pytest.fixture(scope="module")
def two_processes(gin_file, tmp_path_factory):
  model_dir = str(tmp_path_factory.mktemp("two") / "run")
  outputs = ml.run_processes(2, 2, gin_file, model_dir, mode="train_and_evaluate")
  return model_dir, outputs


def assert_same_run(model_dir, reference, steps=range(1, 7)):
  got, want = ml.losses(model_dir), ml.losses(reference)
  np.testing.assert_allclose([got[s] for s in steps], [want[s] for s in steps],
                             rtol=RTOL, atol=ATOL)
  params, meta = checkpoints.load_params(model_dir)
  ref_params, ref_meta = checkpoints.load_params(reference)
  assert meta["step"] == ref_meta["step"] == 6
  jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=RTOL, atol=ATOL),
               params, ref_params)


def test_two_processes_match_one_process(two_processes, one_process):
  model_dir, outputs = two_processes
  assert_same_run(model_dir, one_process)
  # One log: process 0 reports, process 1 stays quiet.
  assert "Joined 2 processes: 4 devices" in outputs[0]
  assert "Training BertForPreTraining" in outputs[0] and "Done." in outputs[0]
  assert "Training BertForPreTraining" not in outputs[1] and "Done." not in outputs[1]


def test_uneven_eval_shards_are_read_in_step(two_processes, one_process):
  # Shard 0 holds 4 eval batches, shard 1 only 2: process 1 feeds empty batches until
  # process 0 is done too, so the final evaluation ends (4 global steps) instead of hanging.
  with open(os.path.join(two_processes[0], "results.json")) as f:
    evals = json.load(f)["eval"]
  assert evals["eval_batches"] == 4 and np.isfinite(evals["loss"])


def test_checkpoint_of_two_processes_continues_in_one(two_processes, one_process, tmp_path):
  resumed = ml.truncate_run(two_processes[0], str(tmp_path / "run"), keep_step=3)
  ml.run_processes(1, 4, os.path.join(resumed, "config.gin"), resumed)
  assert_same_run(resumed, one_process)


@pytest.mark.slow
def test_checkpoint_of_one_process_continues_in_two(one_process, gin_file, tmp_path):
  # As two slices (one per process) of a 1 x 2 mesh each, tiled 2 x 1 over "DCN".
  resumed = ml.truncate_run(one_process, str(tmp_path / "run"), keep_step=3)
  ml.run_processes(2, 2, gin_file, resumed,
                   extra_args=["--gin_bindings=make_mesh.shape = (1, 2)",
                               "--gin_bindings=make_mesh.dcn_shape = (2, 1)"])
  assert_same_run(resumed, one_process)


@pytest.mark.slow
def test_four_processes_match_one_process(one_process, gin_file, tmp_path):
  # One device each: the `model` axis spans two processes, which then read the same
  # batch rows (train_inputs.host_shard) and hold halves of the same parameters.
  ml.run_processes(4, 1, gin_file, str(tmp_path / "run"))
  assert_same_run(str(tmp_path / "run"), one_process)


# ----------------------------------------------------------------------- bad input
def _fail(*flags, timeout_s=4):
  """Runs main with bad multi-process flags; it must fail, fast, and say why."""
  cmd = ml.main_command("--gin_file=unused.gin", "--model_dir=unused", *flags,
                        f"--distributed_timeout={timeout_s}")
  # The subprocess timeout only guards the test; the process must end by itself.
  done = subprocess.run(cmd, env=ml.env(1), cwd=ml.REPO, capture_output=True, text=True,
                        timeout=180)
  return done.returncode, done.stdout + done.stderr


def test_unreachable_coordinator_fails_in_bounded_time():
  port = ml.free_port()  # nobody listens there
  rc, out = _fail(f"--coordinator_address=127.0.0.1:{port}", "--num_processes=2",
                           "--process_id=1")
  assert rc != 0, out
  assert f"Could not reach the coordinator at 127.0.0.1:{port} within 4 s" in out
  assert "Is process 0 running" in out


def test_missing_processes_fail_in_bounded_time():
  # Process 0 of 2 alone: the other process never joins.
  rc, out = _fail(f"--coordinator_address=127.0.0.1:{ml.free_port()}",
                           "--num_processes=2", "--process_id=0")
  assert rc == distributed.INIT_FAILED_EXIT, out
  assert "the processes did not all join within 4 s" in out
  assert "process 0 of 2, coordinator" in out


def test_disagreeing_process_counts_fail_with_a_clear_message():
  address = f"--coordinator_address=127.0.0.1:{ml.free_port()}"
  procs = [subprocess.Popen(ml.main_command("--gin_file=unused.gin", "--model_dir=unused",
                                            address, f"--num_processes={n}",
                                            f"--process_id={i}", "--distributed_timeout=60"),
                            env=ml.env(1), cwd=ml.REPO, text=True, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT)
           for i, n in enumerate([2, 3])]
  try:
    outs = [p.communicate(timeout=180)[0] for p in procs]
  finally:
    for p in procs:
      p.kill()
  assert procs[1].returncode != 0
  assert "started with --num_processes=3 but the coordinator" in outs[1]
  assert "runs 2" in outs[1]


@pytest.mark.parametrize("flags, message", [
    (["--coordinator_address=127.0.0.1:1234", "--num_processes=2", "--process_id=2"],
     "--process_id=2 is outside [0, 2)"),
    (["--coordinator_address=localhost", "--num_processes=2", "--process_id=0"],
     "expected HOST:PORT"),
    (["--num_processes=2", "--process_id=0"], "without --coordinator_address"),
    (["--coordinator_address=127.0.0.1:1234", "--process_id=0"], "needs --num_processes"),
])
def test_inconsistent_flags_are_rejected_before_any_wait(flags, message):
  with pytest.raises(ValueError, match=re.escape(message)):
    distributed.validate(distributed.ProcessSpec(*_parse(flags)))


def _parse(flags):
  values = dict(f.lstrip("-").split("=", 1) for f in flags)
  num, pid = values.get("num_processes"), values.get("process_id")
  return (values.get("coordinator_address"), None if num is None else int(num),
          None if pid is None else int(pid))


# ----------------------------------------------------------------------- host shards
def test_host_shard_of_a_single_process_is_the_whole_batch():
  mesh = partitioning.make_mesh((4, 2))
  sharding = partitioning.batch_sharding(mesh, partitioning.axis_rules())
  assert train_inputs.host_shard(16, sharding) == (0, 1, 16)


def test_multislice_mesh_needs_as_many_slices_as_dcn_shape_says():
  # One process is one slice on CPU: a 1-slice dcn_shape is the plain mesh, 2 is an error.
  mesh = partitioning.make_mesh((-1, 2), dcn_shape=(1, 1))
  assert dict(mesh.shape) == {"data": 4, "model": 2}
  with pytest.raises(ValueError, match=r"dcn_shape \(2, 1\) over 8 devices \(each process"):
    partitioning.make_mesh((-1, 2), dcn_shape=(2, 1))


def test_host_copy_gathers_sharded_arrays():
  mesh = partitioning.make_mesh((4, 2))
  x = jax.device_put(np.arange(32.0).reshape(8, 4),
                     jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec("data", "model")))
  np.testing.assert_array_equal(distributed.host_copy({"x": x})["x"], np.arange(32.0).reshape(8, 4))
