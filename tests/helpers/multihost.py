"""Launching local multi-process runs of `bertjax.main` for the multi-host tests.

Each process is `python -m bertjax.main` (via this file, which registers the test
data) on CPU with its own fake devices, joined over 127.0.0.1 by
`--coordinator_address / --num_processes / --process_id`.
"""
import itertools
import os
import shutil
import socket
import subprocess
import sys
import time

import gin
import numpy as np

from tests import helpers
from tests.helpers import trainer as tl

REPO = tl.REPO


class GlobalSyntheticMlmNsp:
  """The synthetic MLM+NSP stream of the *global* batch, sliced to this host's rows.

  Row block `shard_id` of every global batch is the same whatever the number of
  processes, so N processes see exactly the batches one process sees. Eval shards
  are uneven, as real ones are: shard i holds 4 // (i + 1) batches.
  """

  def __init__(self, task_name, split, batch_size, sequence_length, seed, shard_id=0,
               num_shards=1):
    self.rows = slice(shard_id * batch_size, (shard_id + 1) * batch_size)
    self.stream = tl.SyntheticMlmNsp(task_name, split, batch_size * num_shards,
                                     sequence_length, seed)
    self.num_batches = None if split == "train" else 4 // (shard_id + 1)

  def __iter__(self):
    batches = itertools.islice(self.stream, self.num_batches)
    for batch in batches:
      yield {k: np.asarray(v)[self.rows] for k, v in batch.items()}


gin.external_configurable(GlobalSyntheticMlmNsp, "GlobalSyntheticMlmNsp")

# The tiny run on a 2 x 2 (data x model) mesh, with a checkpoint half-way and an
# evaluation of the whole eval split at the end.
MESH_RUN = ["Trainer.data_fn = @GlobalSyntheticMlmNsp", "make_mesh.shape = (2, 2)",
            "Trainer.num_train_steps = 6", "Trainer.log_every = 1",
            "Trainer.checkpoint_every = 3", "Trainer.eval_steps = None"]


def free_port() -> int:
  with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    return s.getsockname()[1]


def env(devices: int) -> dict:
  # One intra-op thread per process: the processes share very few cores.
  return dict(os.environ, JAX_PLATFORMS="cpu", PYTHONUNBUFFERED="1",
              XLA_FLAGS=helpers.xla_flags(devices) + " "
                        "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1",
              PYTHONPATH=os.pathsep.join([REPO, os.path.join(REPO, "tests")]))


def main_command(*args) -> list[str]:
  return [sys.executable, os.path.abspath(__file__), *args]


def run_processes(num_processes: int, devices: int, gin_file: str, model_dir: str,
                  timeout: float = 400, extra_args=(), mode: str = "train") -> list[str]:
  """Runs `num_processes` joined processes to completion; returns their outputs.

  Every process is killed if the run takes longer than `timeout` seconds, so a test
  can never hang; a failing process fails the test with all outputs attached.
  """
  port = free_port()
  procs = []
  for i in range(num_processes):
    args = [f"--gin_file={gin_file}", f"--model_dir={model_dir}", f"--mode={mode}",
            *extra_args]
    if num_processes > 1:
      args += [f"--coordinator_address=127.0.0.1:{port}", f"--num_processes={num_processes}",
               f"--process_id={i}", "--distributed_timeout=120"]
    procs.append(subprocess.Popen(main_command(*args), env=env(devices), cwd=REPO, text=True,
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT))
  deadline = time.monotonic() + timeout
  outputs = []
  try:
    for p in procs:
      out, _ = p.communicate(timeout=max(1.0, deadline - time.monotonic()))
      outputs.append(out)
  except subprocess.TimeoutExpired:
    for p in procs:
      p.kill()
    raise AssertionError(f"{num_processes}-process run exceeded {timeout} s:\n" +
                         "\n".join(p.communicate()[0][-3000:] for p in procs))
  failed = [i for i, p in enumerate(procs) if p.returncode != 0]
  if failed:
    raise AssertionError(f"process(es) {failed} failed:\n" +
                         "\n-----\n".join(o[-4000:] for o in outputs))
  return outputs


def truncate_run(src: str, dst: str, keep_step: int) -> str:
  """A copy of a run's model_dir holding only its checkpoints up to `keep_step`."""
  shutil.copytree(src, dst)
  ckpt_dir = os.path.join(dst, "checkpoints")
  for name in os.listdir(ckpt_dir):
    if name.isdigit() and int(name) > keep_step:
      shutil.rmtree(os.path.join(ckpt_dir, name))
  return dst


def losses(model_dir: str) -> dict[int, float]:
  """Train loss by step (the latest record wins, so a resumed run overrides)."""
  return {r["step"]: r["loss"] for r in tl.metrics(model_dir)}


if __name__ == "__main__":
  from absl import app
  from bertjax import main
  app.run(main.main)
