"""Faults on purpose: a `bertjax.main` subprocess that SIGKILLs itself at a chosen moment,
and damage done to checkpoint files.

Run as a script, this file is `python -m bertjax.main` with the synthetic test data
registered and, when `BERTJAX_KILL_AT` is set, one self-inflicted SIGKILL:
  step:K   after train step K ran (before anything is saved at K);
  save:K   right after the async save of step K started (Orbax still writing);
  seal:K   after Orbax committed step K, before its checksums were written;
or SIGTERM, the signal of a preemption, which the run survives by saving:
  term:K      after the loop asked whether to stop after step K (so the run is in step K + 1
              when the signal comes, and stops after it);
  termseal:K  after Orbax committed step K, before its checksums were written.
"""
import os
import signal
import subprocess
import sys

from tests import helpers
from tests.helpers import trainer as tl

KILL_ENV = "BERTJAX_KILL_AT"


def _die(signum=signal.SIGKILL) -> None:
  os.kill(os.getpid(), signum)


def _die_after(owner, method: str, step: int, signum=signal.SIGKILL) -> None:
  """Patches `owner.method(self, step, ...)` to signal the process after it ran for `step`
  (and returned what it returns)."""
  original = getattr(owner, method)

  fired = []

  def then_die(self, done, *args, **kwargs):
    result = original(self, done, *args, **kwargs)
    if done == step and not fired:  # once, however often the method is called
      fired.append(done)
      _die(signum)
    return result
  setattr(owner, method, then_die)


def install_kill(spec: str) -> None:
  """Patches bertjax so that the process kills itself as `spec` (module docstring) says."""
  from bertjax.checkpoints import integrity, run
  from bertjax.train import metrics, preemption
  moment, step = spec.split(":")
  step = int(step)
  signum = signal.SIGTERM if moment.startswith("term") else signal.SIGKILL
  if moment == "step":
    _die_after(metrics.MetricsWriter, "advance", step, signum)
  elif moment == "term":
    # Once the loop asked whether to stop after step K (so the run notes the signal during
    # step K + 1 and stops after it); not on the progress bar's `advance`, which moves to
    # step 1 before the loop asks about it, and to step K > 1 only during step K + 1.
    _die_after(preemption.Watch, "reached", step, signum)
  elif moment == "save":
    _die_after(run.RunCheckpoints, "save", step)
  elif moment in ("seal", "termseal"):
    seal = integrity.seal

    def die_before_sealing(step_dir):
      if os.path.basename(step_dir) == str(step):
        _die(signum)
      seal(step_dir)
    integrity.seal = die_before_sealing
  else:
    raise ValueError(f"{KILL_ENV}={spec!r}: use step:K, save:K, seal:K, term:K or termseal:K.")


def popen_main(gin_file, model_dir, *flags, kill_at: str | None = None, compile_cache=None):
  """`python -m bertjax.main --mode=train` (+ flags) in a subprocess, killed as `kill_at`
  says; `compile_cache`: a folder for XLA's persistent cache, shared by runs of one test."""
  env = dict(os.environ, XLA_FLAGS=helpers.xla_flags(1),
             JAX_PLATFORMS="cpu", PYTHONPATH=os.pathsep.join([tl.REPO, os.path.join(tl.REPO, "tests")]))
  env.pop(KILL_ENV, None)
  if kill_at:
    env[KILL_ENV] = kill_at
  if compile_cache:
    env.update(JAX_COMPILATION_CACHE_DIR=str(compile_cache),
               JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0",
               JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES="0")
  cmd = [sys.executable, os.path.abspath(__file__), f"--gin_file={gin_file}",
         f"--model_dir={model_dir}", "--mode=train", *flags]
  return subprocess.Popen(cmd, env=env, cwd=tl.REPO, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True)


# ----------------------------------------------------------------------- damaged files
def data_file(step_dir: str, item: str = "state") -> str:
  """The largest file of an item: where Orbax keeps the array bytes."""
  files = [os.path.join(root, name) for root, _, names in os.walk(os.path.join(step_dir, item))
           for name in names]
  return max(files, key=os.path.getsize)


def overwrite(path: str, num_bytes: int = 4096, seed: int = 0) -> None:
  """Random bytes over the middle of a file (its size unchanged)."""
  import numpy as np
  size = os.path.getsize(path)
  num_bytes = min(num_bytes, size // 2)
  with open(path, "r+b") as f:
    f.seek((size - num_bytes) // 2)
    f.write(np.random.default_rng(seed).bytes(num_bytes))


def truncate(path: str) -> None:
  with open(path, "r+b") as f:
    f.truncate(os.path.getsize(path) // 2)


if __name__ == "__main__":
  from bertjax import main
  if os.environ.get(KILL_ENV):
    install_kill(os.environ[KILL_ENV])
  main.command()  # the real entry point: quiet logs, as a user runs it
