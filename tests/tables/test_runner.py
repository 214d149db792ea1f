"""The table runner: time limits, the shared compilation cache, cells side by side on their
own cores (commands faked, except where a real subprocess must show it)."""
import itertools
import json
import os
import re
import threading
import time
import warnings
from unittest import mock

import pytest

from bertjax.tables import grid, report, runner
from tests.tables.toy import TABLE, FakeCommands


def test_a_sitting_ends_at_its_time_limit_and_the_next_goes_on(tmp_path):
  """With a deadline no cell starts after it and the running one gets the time left as its
  timeout (a clock the fake commands advance); stopped cells are not failures, and the
  next sitting runs exactly what is left. A finished pretraining's fine-tunings come before
  the next pretraining."""
  clock = [1000.0]
  given = {}

  class Timed(FakeCommands):
    def __call__(self, cell, out, timeout=None):
      given[cell.key] = timeout
      if timeout is not None and timeout < 10:  # a command needs 10 s of the fake clock
        clock[0] += timeout
        return "timeout"
      clock[0] += 10
      return super().__call__(cell, out)

  cells = grid.cells(TABLE, "tiny", str(tmp_path))
  with mock.patch.object(runner.time, "time", lambda: clock[0]):
    status = runner.run(cells, log=lambda m: None, execute=Timed(), deadline=1025.0)
  assert given == {"corpus": 25.0, "pretrain/a": 15.0, "finetune/a/sst2/seed0": 5.0}
  assert status["ran"] == ["corpus", "pretrain/a"] and status["failed"] == []
  # In any order: the stopped cell's thread may move the clock past the deadline before the
  # runner sees that it has ended.
  assert sorted(status["out_of_time"]) == [f"finetune/a/sst2/seed{s}" for s in range(3)] + [
      "pretrain/b"]
  assert status["blocked"] == [f"finetune/b/sst2/seed{s}" for s in range(3)]
  assert not cells[2].done()
  later = FakeCommands()
  status = runner.run(cells, log=lambda m: None, execute=later)
  assert later.ran == [f"finetune/a/sst2/seed{s}" for s in range(3)] + ["pretrain/b"] + [
      f"finetune/b/sst2/seed{s}" for s in range(3)]
  assert status["out_of_time"] == [] and status["skipped"] == ["corpus", "pretrain/a"]


def test_a_cell_failing_on_its_own_at_the_deadline_is_a_failure(tmp_path):
  """Only a cell its timeout stopped is out of time; one that exits non-zero, even with the
  deadline passed meanwhile, is reported as failed (its log says why)."""
  clock = [1000.0]

  def crashes_late(cell, out, timeout=None):
    clock[0] += 60
    return 1

  cells = grid.cells(TABLE, "tiny", str(tmp_path))
  with mock.patch.object(runner.time, "time", lambda: clock[0]):
    status = runner.run(cells, log=lambda m: None, execute=crashes_late, deadline=1030.0)
  assert status["failed"] == ["corpus"] and status["ran"] == []
  assert status["out_of_time"] == []
  assert status["blocked"] == [c.key for c in cells[1:]]


def test_a_command_past_its_timeout_is_stopped(tmp_path):
  cell = grid.Cell("pretrain/a", "pretrain", str(tmp_path / "a"),
                   ("python", "-c", "import time; time.sleep(60)"))
  os.makedirs(cell.directory)
  with open(tmp_path / "log", "w") as out:
    assert runner.run_command(cell, out, timeout=1) == "timeout"
  logged = []
  assert runner.run_cell(cell, logged.append, timeout=1) == "out_of_time"
  # (The wall time it reports depends on the machine's load: any whole number of seconds.)
  assert re.match(r"STOPPED pretrain/a at the sitting's time limit after \d+ s \(it resumes "
                  r"from its last checkpoint\)", logged[0]) and not cell.done(), logged


def test_hours_ends_the_sitting_with_its_own_exit_status(tmp_path, capsys):
  from bertjax.tables import __main__ as cli, catalog
  args = ["toy", "--scale=tiny", f"--out={tmp_path / 'out'}", f"--results={tmp_path / 'r.md'}"]
  with mock.patch.dict(catalog.TABLES, {"toy": TABLE}):
    fake = FakeCommands()
    assert cli.main(args + ["--hours=1e-9"], execute=fake) == 3
    assert fake.ran == []
    assert "the sitting's 1e-09 h are spent; 9 cells left. Run the same command again to " \
        "go on: python -m bertjax.tables toy --scale=tiny" in capsys.readouterr().out
    with pytest.raises(ValueError, match="--hours=0.0: give a positive time limit"):
      cli.main(args + ["--hours=0"], execute=fake)
    assert cli.main(args + ["--hours=1"], execute=fake) == 0 and len(fake.ran) == 9

def test_cells_share_the_table_folders_compilation_cache(tmp_path, monkeypatch):
  """A command run with `compilation_cache` keeps its compiled programs there: the second
  run of the same program finds it (JAX's persistent cache, given through the environment);
  a cache the user names wins."""
  program = ("import jax, jax.numpy as jnp; "
             "jax.jit(lambda x: jnp.sin(x) @ x.T)(jnp.ones((64, 64))).block_until_ready(); "
             "print('cache', jax.config.jax_compilation_cache_dir)")
  cell = grid.Cell("speed/a", "speed", str(tmp_path / "a"), ("python", "-c", program))
  os.makedirs(cell.directory)
  cache = tmp_path / "out" / runner.COMPILATION_CACHE
  monkeypatch.setenv("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")
  monkeypatch.delenv("JAX_COMPILATION_CACHE_DIR", raising=False)
  with open(tmp_path / "log", "w") as out:
    assert runner.run_command(cell, out, compilation_cache=str(cache)) == 0
  entries = os.listdir(cache)
  assert any(e.startswith("jit_") for e in entries), entries
  assert f"cache {cache}" in (tmp_path / "log").read_text()
  mine = tmp_path / "mine"
  monkeypatch.setenv("JAX_COMPILATION_CACHE_DIR", str(mine))
  with open(tmp_path / "log", "w") as out:
    assert runner.run_command(cell, out, compilation_cache=str(cache)) == 0
  assert f"cache {mine}" in (tmp_path / "log").read_text() and os.listdir(mine)
  assert sorted(os.listdir(cache)) == sorted(entries)


def test_the_command_gives_its_cells_the_table_folders_cache(tmp_path, monkeypatch):
  from bertjax.tables import __main__ as cli, catalog
  given = []

  def run_command(cell, out, timeout=None, compilation_cache=None):
    given.append(compilation_cache)
    return FakeCommands()(cell, out)

  monkeypatch.setattr(runner, "run_command", run_command)
  out = tmp_path / "out"
  with mock.patch.dict(catalog.TABLES, {"toy": TABLE}):
    assert cli.main(["toy", "--scale=tiny", f"--out={out}",
                     f"--results={tmp_path / 'toy.md'}"]) == 0
  assert given and set(given) == {str(out / runner.COMPILATION_CACHE)}


class Concurrent(FakeCommands):
  """Fake commands that record when each ran (in order of events) and on which cores; the
  cells named in `meet` must be running at the same time (each waits for the others at a
  barrier, which breaks after 10 s alone)."""

  def __init__(self, meet=(), slow=(), **kwargs):
    super().__init__(**kwargs)
    self.spans, self.cores, self.meet, self.slow = {}, {}, set(meet), set(slow)
    self.barrier = threading.Barrier(len(meet), timeout=10) if meet else None
    self.clock = itertools.count()

  def __call__(self, cell, out, timeout=None, cpus=None):
    start = next(self.clock)
    if cell.key in self.meet:
      self.barrier.wait()  # BrokenBarrierError: they never ran at once
    if cell.key in self.slow:
      time.sleep(0.5)
    self.cores[cell.key] = cpus
    if cell.kind == "speed":
      with open(os.path.join(cell.directory, grid.SPEED_FILE), "w") as f:
        json.dump({"speedup": 2.0}, f)
    rc = 0 if cell.kind == "speed" else super().__call__(cell, out)
    self.spans[cell.key] = (start, next(self.clock))
    return rc


def test_workers_run_cells_at_once_each_on_its_own_cores(tmp_path, monkeypatch):
  monkeypatch.setattr(runner.os, "sched_getaffinity", lambda pid: {0, 1, 2, 3})
  cells = grid.cells(TABLE, "tiny", str(tmp_path))
  fake = Concurrent(meet=("pretrain/a", "pretrain/b"))
  status = runner.run(cells, log=lambda m: None, execute=fake, workers=2)
  assert sorted(status["ran"]) == sorted(c.key for c in cells) and not status["failed"]
  # The two pretrainings ran together (they met at the barrier), on two halves of the cores.
  assert fake.cores["pretrain/a"] != fake.cores["pretrain/b"]
  assert {fake.cores["pretrain/a"], fake.cores["pretrain/b"]} == {frozenset({0, 1}),
                                                                   frozenset({2, 3})}
  # No cell started before the cells it needs had finished.
  for cell in cells:
    for need in cell.needs:
      assert fake.spans[need][1] < fake.spans[cell.key][0], (cell.key, need)
  records = [c.record() for c in cells]
  assert all(r["cores"] == 2 for r in records)
  text = report.markdown(TABLE, "tiny", cells, "python -m bertjax.tables toy", None)
  assert text.count(" on 2 cores |") == 2  # each pretraining's wall time says how it ran


def test_with_workers_a_failure_blocks_only_its_own_cells(tmp_path, monkeypatch):
  monkeypatch.setattr(runner.os, "sched_getaffinity", lambda pid: {0, 1})
  cells = grid.cells(TABLE, "tiny", str(tmp_path))
  status = runner.run(cells, log=lambda m: None, execute=Concurrent(fail={"pretrain/b"}),
                      workers=2)
  assert status["failed"] == ["pretrain/b"]
  assert status["blocked"] == [f"finetune/b/sst2/seed{s}" for s in range(3)]
  assert sorted(status["ran"]) == sorted(["corpus", "pretrain/a"] + [
      f"finetune/a/sst2/seed{s}" for s in range(3)])


def test_a_timing_cell_runs_alone_on_every_core(tmp_path, monkeypatch):
  monkeypatch.setattr(runner.os, "sched_getaffinity", lambda pid: {0, 1})
  speed = grid.Cell("speed", "speed", str(tmp_path / "speed"), ("python", "-c", "pass"),
                    needs=("pretrain/a",))
  cells = grid.cells(TABLE, "tiny", str(tmp_path))
  cells = cells[:2] + [speed] + cells[2:]
  fake = Concurrent(slow={"pretrain/b", "speed"})  # both would be running when speed is ready
  runner.run(cells, log=lambda m: None, execute=fake, workers=2)
  assert fake.cores["speed"] is None
  start, end = fake.spans["speed"]
  for key, (other_start, other_end) in fake.spans.items():
    if key != "speed":
      assert other_end < start or other_start > end, f"{key} ran beside the timing"


def test_workers_pin_the_command_to_its_cores(tmp_path):
  core = min(os.sched_getaffinity(0))
  cell = grid.Cell("pretrain/a", "pretrain", str(tmp_path / "a"),
                   ("python", "-c", "import os; print('cores', sorted(os.sched_getaffinity(0)))"))
  os.makedirs(cell.directory)
  with open(tmp_path / "log", "w") as out:
    assert runner.run_command(cell, out, cpus=frozenset({core})) == 0
  assert f"cores [{core}]" in (tmp_path / "log").read_text()


def test_workers_beyond_the_cores_fail_with_advice(monkeypatch):
  monkeypatch.setattr(runner.os, "sched_getaffinity", lambda pid: {0, 1})
  with pytest.raises(ValueError, match=r"--workers=3: more cells at once than the 2 cores "
                                       r"this process may use \(\[0, 1\]\); use at most "
                                       r"--workers=2"):
    runner.cpu_slots(3)
  with pytest.raises(ValueError, match="--workers=0: run at least one cell at a time"):
    runner.cpu_slots(0)
  assert runner.cpu_slots(1) == [None]


def test_the_command_passes_workers_on(tmp_path, monkeypatch):
  from bertjax.tables import __main__ as cli, catalog
  monkeypatch.setattr(runner.os, "sched_getaffinity", lambda pid: {0, 1})
  fake = Concurrent(meet=("pretrain/a", "pretrain/b"))
  out = tmp_path / "out"
  with mock.patch.dict(catalog.TABLES, {"toy": TABLE}):
    assert cli.main(["toy", "--scale=tiny", f"--out={out}", f"--results={tmp_path / 'r.md'}",
                     "--workers=2"], execute=fake) == 0
    with pytest.raises(ValueError, match="--workers=5: more cells at once"):
      cli.main(["toy", "--scale=tiny", f"--out={tmp_path / 'other'}", "--workers=5"],
               execute=fake)
  assert fake.cores["pretrain/a"] in ({0}, {1}) and not (tmp_path / "other").exists()


def test_starting_a_cell_from_a_process_that_loaded_jax_warns_nothing(tmp_path):
  """JAX warns on any fork of a process whose backend started; a cell's fork only execs a new
  Python, so the runner's log stays free of that warning (and any other)."""
  import jax  # pylint: disable=g-import-not-at-top
  jax.devices()  # the warning comes once its backend has started
  cell = grid.Cell("quiet/a", "quiet", str(tmp_path / "a"), ("python", "-c", "print('ran')"))
  os.makedirs(cell.directory)
  with warnings.catch_warnings(record=True) as caught, open(tmp_path / "log", "w") as out:
    warnings.simplefilter("always")
    assert runner.run_command(cell, out) == 0
  assert [str(w.message) for w in caught] == []
  assert "ran" in (tmp_path / "log").read_text()
