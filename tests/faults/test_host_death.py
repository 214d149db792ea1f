"""A host of a multi-process run dies: `python -m bertjax.train.hosts` stops the others and
says in one line which host died, how, and how to resume; a preemption signal reaches every
host once. The first tests use stand-in hosts (a few lines of Python); the last kills a host
of a real 2-process `bertjax.main` run on 127.0.0.1."""
import os
import re
import signal
import subprocess
import sys
import threading
import time

import pytest

from bertjax.train import hosts
from tests.helpers import multihost as ml
from tests.helpers import trainer as tl

# A stand-in host: host 1 ends with status 3 at once, the others wait (a minute at most); on
# SIGTERM a host exits 143, as a preempted run does.
STAND_IN = ("import signal, sys, time\n"
            "signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))\n"
            "if '--process_id=1' in sys.argv and 'die' in sys.argv: sys.exit(3)\n"
            "print('host up', flush=True); time.sleep(60)\n")


def _launch(num_processes, *command, env=None):
  return subprocess.Popen([sys.executable, "-m", "bertjax.train.hosts",
                           f"--num_processes={num_processes}", "--", *command],
                          env=env, cwd=ml.REPO, text=True, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT)


def _pids(line):
  return [int(p) for p in re.findall(r"host \d+ pid (\d+)", line)]


def _alive(pid):
  try:
    os.kill(pid, 0)
  except ProcessLookupError:
    return False
  with open(f"/proc/{pid}/stat") as f:  # a zombie is not running
    return f.read().rsplit(")", 1)[1].split()[0] != "Z"


def test_a_host_that_dies_stops_the_others_with_one_line():
  launcher = _launch(3, sys.executable, "-c", STAND_IN, "die")
  out, _ = launcher.communicate(timeout=60)
  assert launcher.returncode == 3, out
  deaths = [l for l in out.splitlines() if "died" in l]
  assert deaths == [
      "bertjax.train.hosts: host 1 of 3 (pid %d) died (exit status 3); stopped the other "
      "hosts (0, 2). Run the same command again: the run resumes from its last sealed "
      "checkpoint." % _pids(out)[1]], out
  assert not any(_alive(p) for p in _pids(out))


def test_sigterm_reaches_every_host_and_is_not_a_death():
  launcher = _launch(2, sys.executable, "-c", STAND_IN)
  for _ in range(2):  # both hosts are up (their SIGTERM handler set)
    while "host up" not in launcher.stdout.readline():
      pass
  launcher.send_signal(signal.SIGTERM)
  out, _ = launcher.communicate(timeout=60)
  assert launcher.returncode == 143 and "died" not in out, out


@pytest.mark.parametrize("argv, message", [
    (["--num_processes=2"], "no command: give it after `--`"),
    (["--num_processes=0", "--", "true"], "--num_processes=0: must be >= 1"),
])
def test_a_bad_launch_is_refused_before_any_host_starts(argv, message, capsys):
  with pytest.raises(SystemExit) as stopped:
    hosts.main(argv)
  assert stopped.value.code == 2 and message in capsys.readouterr().err


@pytest.mark.slow
def test_a_killed_host_of_a_training_run_is_named_and_the_survivor_stopped(tmp_path):
  gin_file = tl.write_gin(str(tmp_path / "run.gin"), ml.MESH_RUN)
  launcher = _launch(2, *ml.main_command(f"--gin_file={gin_file}",
                                         f"--model_dir={tmp_path / 'run'}", "--mode=train",
                                         "--distributed_timeout=120"), env=ml.env(2))
  guard = threading.Timer(240, launcher.kill)  # the test never hangs
  guard.start()
  try:
    lines = []
    while not any("Joined 2 processes" in l for l in lines):  # both hosts are in the run
      lines.append(launcher.stdout.readline())
      assert lines[-1], "".join(lines)
    pids = _pids(next(l for l in lines if "started 2 hosts" in l))
    os.kill(pids[1], signal.SIGKILL)
    began = time.monotonic()
    out = "".join(lines) + launcher.communicate()[0]
  finally:
    guard.cancel()
  assert launcher.returncode == 128 + signal.SIGKILL, out[-3000:]
  assert (f"bertjax.train.hosts: host 1 of 2 (pid {pids[1]}) died (killed by SIGKILL); "
          "stopped the other hosts (0). Run the same command again: the run resumes from "
          "its last sealed checkpoint.") in out, out[-3000:]
  assert time.monotonic() - began < 30  # not after JAX's heartbeat timeout
  assert not _alive(pids[0])
