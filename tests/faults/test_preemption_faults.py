"""Preemption and concurrency faults: SIGTERM at a random step and right after a commit,
a SIGKILL between Orbax's commit and the seal of a run's only checkpoint, and a second
writer on one model_dir. Progress is kept (at most the current step is lost) and a run
resumed after them ends bit-identical to an uninterrupted one."""
import json
import os
import random
import signal
import socket
import subprocess

import jax
import numpy as np
import pytest

from bertjax import checkpoints, run_lock
from tests.helpers import faults
from tests.helpers import trainer as tl


def _gin(tmp_path, total, every):
  return tl.write_gin(str(tmp_path / "run.gin"), [
      f"Trainer.num_train_steps = {total}", f"Trainer.checkpoint_every = {every}",
      "Trainer.log_every = 1", "Trainer.keep_checkpoints = 3"])


def _state(model_dir, step):
  return checkpoints.restore_numpy(os.path.join(model_dir, checkpoints.RUN_SUBDIR, str(step),
                                                checkpoints.STATE_ITEM))


def _run(gin_file, model_dir, cache, kill_at=None, *flags):
  proc = faults.popen_main(gin_file, model_dir, *flags, kill_at=kill_at, compile_cache=cache)
  out, err = proc.communicate(timeout=900)
  return proc.returncode, out, err


@pytest.mark.slow
def test_sigterm_saves_the_step_and_the_run_resumes_bit_identical(tmp_path):
  total, every = 12, 4
  gin_file, cache = _gin(tmp_path, total, every), tmp_path / "xla_cache"
  rc, _, err = _run(gin_file, str(tmp_path / "reference"), cache)
  assert rc == 0, err[-3000:]

  model_dir = str(tmp_path / "preempted")
  first = random.Random().randint(1, 6)  # SIGTERM during the next step: it is saved
  rc, _, err = _run(gin_file, model_dir, cache, kill_at=f"term:{first}")
  assert rc == 128 + signal.SIGTERM, err[-3000:]
  assert f"Stopped by SIGTERM after step {first + 1}, which is saved" in err, err[-2000:]
  assert checkpoints.RunCheckpoints(model_dir).newest_intact_step() == first + 1

  # SIGTERM while the step-8 checkpoint is committed but not yet sealed (sealed in the
  # loop's thread, so that the signal comes before step 9): it is sealed all the same, and
  # the run stops after the next step.
  rc, out, err = _run(gin_file, model_dir, cache, "termseal:8",
                      "--gin_bindings=Trainer.async_checkpoints = False")
  assert f"Resumed from step {first + 1} " in out
  assert rc == 128 + signal.SIGTERM and "after step 9, which is saved" in err, err[-2000:]
  assert checkpoints.RunCheckpoints(model_dir).damage(8) is None

  rc, out, err = _run(gin_file, model_dir, cache)
  assert rc == 0 and "Resumed from step 9 " in out, err[-2000:]
  want, got = _state(str(tmp_path / "reference"), total), _state(model_dir, total)
  assert jax.tree.structure(got) == jax.tree.structure(want)
  for a, b in zip(jax.tree.leaves(want), jax.tree.leaves(got)):
    np.testing.assert_array_equal(b, a)


@pytest.mark.slow
def test_a_killed_run_whose_only_checkpoint_was_never_sealed_resumes_from_it(tmp_path):
  gin_file, cache = _gin(tmp_path, 6, 3), tmp_path / "xla_cache"
  model_dir = str(tmp_path / "run")
  rc, _, err = _run(gin_file, model_dir, cache, kill_at="seal:3")
  assert rc == -signal.SIGKILL, err[-3000:]
  rc, out, err = _run(gin_file, model_dir, cache)
  assert rc == 0, err[-3000:]
  assert "checkpoints/3 was committed but not sealed" in out and "Resumed from step 3 " in out


def _lock(folder, pid, host=None):
  with open(os.path.join(folder, run_lock.LOCK_FILE), "w") as f:
    json.dump({"host": host or socket.gethostname(), "pid": pid, "since": "earlier",
               "command": "python -m bertjax.main (the first)"}, f)


def test_a_second_writer_is_refused_naming_the_holder(tmp_path):
  folder = str(tmp_path)
  _lock(folder, os.getpid())  # this test process: alive
  with pytest.raises(run_lock.LockError, match=rf"in use by python -m bertjax.main \(the first\) "
                                               rf"\(pid {os.getpid()} on "):
    run_lock.acquire(folder, "training run")
  _lock(folder, 12345, host="another-machine")
  with pytest.raises(run_lock.LockError, match="if that process is gone .* delete"):
    run_lock.acquire(folder, "training run")


def test_the_lock_of_a_dead_process_is_taken_over(tmp_path):
  dead = subprocess.Popen(["true"])
  dead.wait()
  _lock(str(tmp_path), dead.pid)
  said = []
  with run_lock.hold(str(tmp_path), "training run", said.append):
    held = json.load(open(tmp_path / run_lock.LOCK_FILE))
    assert held["pid"] == os.getpid()
  assert said == [f"Took over the lock of {tmp_path} from pid {dead.pid} on "
                  f"{socket.gethostname()}, which is no longer running."]
  assert not (tmp_path / run_lock.LOCK_FILE).exists()  # released


def test_main_refuses_a_model_dir_in_use_before_writing(tmp_path):
  model_dir = tmp_path / "run"
  model_dir.mkdir()
  _lock(str(model_dir), os.getpid())
  gin_file = _gin(tmp_path, 2, 2)
  rc, _, err = _run(gin_file, str(model_dir), None)
  assert rc == 1 and "Not started: " in err and "is in use by" in err, err[-2000:]
  assert sorted(os.listdir(model_dir)) == [run_lock.LOCK_FILE]  # no config.gin written
