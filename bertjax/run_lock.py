"""One writer per output folder: a lock file naming the process that holds it.

`python -m bertjax.main` holds its model_dir, `finetune.run` its output_dir and the tables
runner its table's folder while they run. A second process on the same folder is refused
before it writes anything, naming the holder (host, pid, command). A lock left behind by a
process that died on this machine (SIGKILL, a crash) is taken over, saying so; one held on
another machine cannot be checked, so it is refused with how to clear it.

    with run_lock.hold(model_dir, "the training run"):
      ...

Only local folders are locked (a `gs://` path has no atomic create), and in a multi-process
run only process 0 takes the lock: it speaks for the whole run.
"""
import contextlib
import json
import os
import socket
import sys
import time
from typing import Callable, Iterator

LOCK_FILE = ".bertjax.lock"


class LockError(RuntimeError):
  """The folder is in use by another live process (the message names it)."""


def _alive(pid: int) -> bool:
  try:
    os.kill(pid, 0)
  except ProcessLookupError:
    return False
  except PermissionError:  # exists, owned by someone else
    return True
  return True


def _start_time(pid: int) -> str | None:
  """The process's start time in clock ticks since boot (/proc), to tell a pid reused by
  another process from the one that wrote the lock; None where /proc is not there."""
  try:
    with open(f"/proc/{pid}/stat") as f:
      return f.read().rsplit(")", 1)[1].split()[19]
  except (OSError, IndexError):
    return None


def _record() -> dict:
  return {"host": socket.gethostname(), "pid": os.getpid(), "started": _start_time(os.getpid()),
          "since": time.strftime("%Y-%m-%d %H:%M:%S"), "command": " ".join(sys.argv)[:300]}


def _holder_is_dead(holder: dict) -> bool:
  if holder.get("host") != socket.gethostname():
    return False  # cannot tell from here
  pid = holder.get("pid")
  if not isinstance(pid, int) or not _alive(pid):
    return True
  started = _start_time(pid)
  return started is not None and holder.get("started") not in (None, started)


def _read(path: str) -> dict:
  try:
    with open(path) as f:
      holder = json.load(f)
    return holder if isinstance(holder, dict) else {}
  except (OSError, ValueError):
    return {}  # half-written by a process that died creating it: nobody holds it


def acquire(folder: str, what: str, log: Callable[[str], None] = print) -> str | None:
  """Takes the lock of `folder` (which must exist); returns its path, or None where
  nothing is locked (a remote path, or a process other than 0). Raises LockError."""
  if "://" in folder or _process_index() != 0:
    return None
  path = os.path.join(folder, LOCK_FILE)
  for _ in range(2):
    try:
      fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    except FileExistsError:
      holder = _read(path)
      if holder and not _holder_is_dead(holder):
        raise LockError(
            f"{folder} is in use by {holder.get('command') or 'another process'} (pid "
            f"{holder.get('pid')} on {holder.get('host')}, since {holder.get('since')}); one "
            f"{what} at a time. Wait for it to end or stop it; if that process is gone (it "
            f"ran on another machine), delete {path}.") from None
      if holder:
        log(f"Took over the lock of {folder} from pid {holder.get('pid')} on "
            f"{holder.get('host')}, which is no longer running.")
      with contextlib.suppress(FileNotFoundError):
        os.remove(path)
      continue
    with os.fdopen(fd, "w") as f:
      json.dump(_record(), f)
    return path
  raise LockError(f"Could not take the lock {path}: another process keeps creating it.")


def release(path: str | None) -> None:
  if path is None:
    return
  if _read(path).get("pid") == os.getpid():
    with contextlib.suppress(FileNotFoundError):
      os.remove(path)


@contextlib.contextmanager
def hold(folder: str, what: str, log: Callable[[str], None] = print) -> Iterator[None]:
  """The lock of `folder` for the duration of the block (see `acquire`)."""
  path = acquire(folder, what, log)
  try:
    yield
  finally:
    release(path)


def _process_index() -> int:
  if "jax" not in sys.modules:  # the tables runner never loads JAX
    return 0
  import jax  # pylint: disable=g-import-not-at-top
  return jax.process_index()
