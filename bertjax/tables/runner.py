"""Runs a table's cells (grid.py), each once: a killed or timed-out sitting picks up where
it stopped.

A cell is marked done (grid.MARKER, written atomically: tmp + rename) only after its command
exited 0; the marker records the command and its recipe, the wall time of every attempt and
what the cell produced. Done cells are skipped: a pretraining cell resumes from its newest
checkpoint (the trainer's own resumption), a fine-tuning cell starts over in an emptied
folder. Each attempt's output goes to `<cell>/cell.log`, its exit and wall time to
`<cell>/attempts.jsonl`. Cells may run side by side, each on its own cores (`run`'s workers),
and share the table folder's JAX compilation cache.
"""
import concurrent.futures
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import warnings
from typing import Callable, Optional

from bertjax import output_paths, paths, progress
from bertjax.tables.grid import RECORDS, Cell, atomic_json

LOG, ATTEMPTS = output_paths.RUNNER_FILES  # beside the cell's output, which may claim it
# The table folder's JAX compilation cache, shared by its cells: seeds and arms of one size
# compile the same programs, and a cache hit skips XLA's compile (about 35 of a 90 s SST-2
# fine-tuning on 2 CPU cores) while running the very same executable.
COMPILATION_CACHE = "xla_cache"


def _attempts(cell: Cell) -> list[dict]:
  path = os.path.join(cell.directory, ATTEMPTS)
  if not os.path.isfile(path):
    return []
  with open(path) as f:
    return [json.loads(line) for line in f if line.strip()]


def run_command(cell: Cell, out, timeout: Optional[float] = None,
                compilation_cache: Optional[str] = None,
                cpus: Optional[frozenset[int]] = None):
  """Runs the cell's command from the repository root, output to `out`; its exit status.
  With `compilation_cache`, the command keeps JAX's compiled programs there (unless the
  environment names its own JAX_COMPILATION_CACHE_DIR); with `cpus`, it runs on those cores
  only (`taskset`)."""
  env = {**os.environ, "PYTHONPATH": os.pathsep.join(
      [str(paths.REPO_ROOT)] + [p for p in [os.environ.get("PYTHONPATH")] if p])}
  if compilation_cache and not env.get("JAX_COMPILATION_CACHE_DIR"):
    env["JAX_COMPILATION_CACHE_DIR"] = compilation_cache
  pin = () if cpus is None else ("taskset", "--cpu-list", ",".join(map(str, sorted(cpus))))
  with warnings.catch_warnings():
    # JAX warns on every fork of a process that loaded it; this child only sets its
    # death signal and execs a new Python, which is safe.
    warnings.filterwarnings("ignore", message=r"os\.fork\(\) was called", category=RuntimeWarning)
    child = subprocess.Popen(pin + (sys.executable,) + cell.command[1:], cwd=paths.REPO_ROOT,
                             env=env, stdout=out, stderr=subprocess.STDOUT,
                             preexec_fn=_end_with_parent)
  try:
    return child.wait(timeout=timeout)
  except subprocess.TimeoutExpired:
    child.terminate()  # SIGTERM: a pretraining saves its step before it ends
    child.wait()
    return "timeout"


def _end_with_parent() -> None:
  """In the cell's process, before it starts: SIGTERM it when the runner dies, however it
  dies, so that no orphaned cell goes on writing into a folder that the next runner
  starts again (a pretraining then saves its step and stops). Linux only
  (prctl PR_SET_PDEATHSIG); elsewhere nothing."""
  try:
    import ctypes  # pylint: disable=g-import-not-at-top
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # 1: PR_SET_PDEATHSIG
  except OSError:
    pass


def recipe(cell: Cell, out: str) -> str:
  """The cell's command with the table's folder as `$OUT`: what its record must match for
  the cell to count as done wherever the table's folder lives."""
  return " ".join(a.replace(out, "$OUT") for a in cell.command)


def stale(cells: list[Cell], out: str, ledger: dict[str, dict]) -> list[tuple[str, str, str]]:
  """(key, recorded recipe, current recipe) of every finished cell (by its done-marker, else
  its ledger entry) made by another command than the table now gives it, or made from a
  cell so changed: its scale or arms changed since, and its results would mix two recipes.
  `cells` is in running order."""
  found, changed = [], set()
  for cell in cells:
    record = cell.record() if cell.done() else ledger.get(cell.key)
    if record is None:
      continue
    was = record.get("recipe") or _legacy_recipe(cell, record["command"], out)
    now = recipe(cell, out)
    if was != now or changed.intersection(cell.needs):
      changed.add(cell.key)
      found.append((cell.key, was, now))
  return found


def _legacy_recipe(cell: Cell, command: str, out: str) -> str:
  """The recipe of a record written before records kept one: its command with the folder it
  ran in (found before the cell's own path in it, else `out`) as `$OUT`."""
  inside = os.path.relpath(cell.directory, out)
  found = re.search(rf"(/[^\s=']*)/{re.escape(inside)}(?![^\s'/])", command)
  return command.replace(found.group(1) if found else out, "$OUT")


def run_cell(cell: Cell, log: Callable[[str], None] = print,
             execute: Callable[..., object] = run_command,
             table_out: Optional[str] = None, timeout: Optional[float] = None,
             cpus: Optional[frozenset[int]] = None) -> str:
  """Runs one cell (`execute(cell, log_file)` -> exit status, or 'timeout' when given
  `timeout` seconds and stopped there; on the cores `cpus` when given) and marks it done on
  success (recording its recipe when the table's folder `table_out` is given, and the
  number of cores when pinned). Returns 'ran', 'failed' or 'out_of_time' (stopped by its
  timeout: a cell that fails on its own near the limit is 'failed')."""
  if cell.fresh:
    shutil.rmtree(cell.directory, ignore_errors=True)
  os.makedirs(cell.directory, exist_ok=True)
  start = time.time()
  with open(os.path.join(cell.directory, LOG), "a") as out:
    out.write(f"\n$ {' '.join(cell.command)}\n")
    out.flush()
    options = {**({} if timeout is None else {"timeout": timeout}),
               **({} if cpus is None else {"cpus": cpus})}
    rc = execute(cell, out, **options)
  pinned = {} if cpus is None else {"cores": len(cpus)}
  attempt = {"start": start, "wall_s": time.time() - start, "rc": rc, **pinned}
  with open(os.path.join(cell.directory, ATTEMPTS), "a") as f:
    f.write(json.dumps(attempt) + "\n")
  if rc == "timeout":
    log(f"STOPPED {cell.key} at the sitting's time limit after {attempt['wall_s']:.0f} s"
        + (" (it resumes from its last checkpoint)" if cell.kind == "pretrain" else ""))
    return "out_of_time"
  if rc != 0:
    log(f"FAILED {cell.key} (exit {rc} after {attempt['wall_s']:.0f} s); "
        f"log: {os.path.join(cell.directory, LOG)}")
    return "failed"
  attempts = _attempts(cell)
  atomic_json(cell.marker, {
      "key": cell.key, "command": " ".join(cell.command),
      **({"recipe": recipe(cell, table_out)} if table_out else {}),
      "wall_s": attempt["wall_s"], **pinned,
      "wall_s_all_attempts": sum(a["wall_s"] for a in attempts), "attempts": len(attempts),
      "finished": time.time(), **RECORDS[cell.kind](cell.directory)})
  log(f"done {cell.key} in {attempt['wall_s']:.0f} s")
  return "ran"


def cpu_slots(workers: int) -> list[Optional[frozenset[int]]]:
  """The cores of each of `workers` cells run at once: this process's cores split into
  `workers` even groups ([None], no pinning, for one worker)."""
  if workers < 1:
    raise ValueError(f"--workers={workers}: run at least one cell at a time.")
  if workers == 1:
    return [None]
  if not hasattr(os, "sched_getaffinity") or not shutil.which("taskset"):
    raise ValueError(f"--workers={workers} pins each cell to its own cores with Linux's "
                     "`taskset` (util-linux), which this machine lacks; use --workers=1.")
  cores = sorted(os.sched_getaffinity(0))
  if workers > len(cores):
    raise ValueError(f"--workers={workers}: more cells at once than the {len(cores)} cores "
                     f"this process may use ({cores}); use at most --workers={len(cores)}.")
  share = len(cores) // workers
  return [frozenset(cores[i * share:(i + 1) * share]) for i in range(workers)]


def run(all_cells: list[Cell], log: Callable[[str], None] = print,
        execute: Callable[..., object] = run_command,
        on_done: Callable[[Cell], None] = lambda cell: None,
        table_out: Optional[str] = None,
        deadline: Optional[float] = None, workers: int = 1,
        show_progress: Optional[bool] = None) -> dict[str, list[str]]:
  """Runs every cell not yet done whose prerequisites are done, calling `on_done(cell)`
  after each success (each done-marker records the cell's recipe when the table's folder
  `table_out` is given). With a `deadline` (a `time.time()`), no cell starts after it and
  those running then are stopped (`execute` gets `timeout=`).

  Of the cells whose prerequisites are done, the deepest starts first (a fine-tuning of a
  finished pretraining before another pretraining), in running order among equals: a
  sitting cut short leaves whole arms done, whose results the ledger keeps, rather than
  pretrainings a fresh machine has to make again for want of their checkpoints.

  With `workers` > 1, up to that many cells run at once, each pinned to its share of the
  cores (`execute` gets `cpus=`); a timing cell (grid.ALONE_KINDS) runs with no other cell
  beside it, on every core.
  Returns the keys {'skipped': ..., 'ran': ..., 'failed': ..., 'blocked': ...,
  'out_of_time': ...}: the last are the cells stopped at the deadline or not started for it."""
  status = {"skipped": [c.key for c in all_cells if c.done()],
            "ran": [], "failed": [], "blocked": [], "out_of_time": []}
  by_key = {c.key: c for c in all_cells}
  depth = {}
  for cell in all_cells:  # grid.cells lists a cell after those it needs
    depth[cell.key] = 1 + max((depth[k] for k in cell.needs if k in depth), default=-1)
  pending = sorted((c for c in all_cells if not c.done()), key=lambda c: -depth[c.key])
  unfinished = set()  # keys of this sitting's cells that failed, were blocked or ran out of time
  free = cpu_slots(workers)
  running = {}        # future -> (cell, its slot of cores)
  bar = progress.Progress(len(all_cells), len(status["skipped"]), "cells", "cell", show_progress)

  def say(message: str) -> None:
    with bar.above():
      log(message)

  def end(cell: Cell, outcome: str) -> None:
    status[outcome].append(cell.key)
    if outcome != "ran":
      unfinished.add(cell.key)

  with bar, concurrent.futures.ThreadPoolExecutor(max_workers=workers) as pool:
    while pending or running:
      for cell in list(pending):
        if unfinished.intersection(cell.needs):
          end(cell, "blocked")
        elif not all(by_key[k].done() for k in cell.needs):
          continue  # a prerequisite is still running or waiting
        elif deadline is not None and deadline <= time.time():
          end(cell, "out_of_time")
        elif not free or any(c.alone for c, _ in running.values()) or (cell.alone and running):
          break  # no cores for it yet; the cells after it wait too, keeping the order
        else:
          slot = free.pop(0)
          say(f"running {cell.key}")
          left = None if deadline is None else deadline - time.time()
          cores = None if cell.alone else slot  # alone, it may use every core
          running[pool.submit(run_cell, cell, say, execute, table_out, left, cores)] = (cell,
                                                                                        slot)
        pending.remove(cell)
      if not running:
        continue
      bar.running(", ".join(c.key for c, _ in running.values()))
      finished, _ = concurrent.futures.wait(running,
                                            return_when=concurrent.futures.FIRST_COMPLETED)
      for future in finished:
        cell, slot = running.pop(future)
        free.append(slot)
        outcome = future.result()
        end(cell, outcome)
        if outcome == "ran":
          bar.advance(bar.done + 1)
          on_done(cell)
  return status
