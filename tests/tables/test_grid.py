"""The table runner: cells, done-markers, resumption, aggregation (commands faked)."""
import dataclasses
import json
import math
import itertools
import os
import subprocess
import threading
import time
from unittest import mock

import pytest

from bertjax.tables import bert, grid, ledger, report
from bertjax.tables.spec import Arm, Table, Task
from bertjax.tables import scales

TASK = Task("sst2", "SST-2 acc", "dev/accuracy")
TABLE = Table("toy", "toy", "Toy table", "A beats B.",
              arms=(Arm("a", "A", ("models/bert_base.gin", "objectives/mlm_nsp.gin")),
                    Arm("b", "B", ("models/bert_base.gin", "objectives/bert_mlm.gin"))),
              tasks=(TASK, Task("rte", "RTE acc", "dev/accuracy")),
              scales={"tiny": scales.tiny(("sst2",), seeds=(0, 1, 2))})
# What each fake fine-tuning run scores: arm a 0.6 / 0.7 / 0.8, arm b 0.5 flat.
SCORES = {"a": (0.6, 0.7, 0.8), "b": (0.5, 0.5, 0.5)}


class FakeCommands:
  """Writes what each real command would (results.json, metrics.jsonl, stats.json)."""

  def __init__(self, fail=(), corpus_tokens=10, mlm_accuracy=0.25, more_metrics=None):
    self.ran, self.fail, self.corpus_tokens = [], set(fail), corpus_tokens
    self.mlm_accuracy, self.more_metrics = mlm_accuracy, more_metrics or {}

  def __call__(self, cell, out, timeout=None):  # the commands take no time
    self.ran.append(cell.key)
    if cell.key in self.fail:
      return 1
    write = lambda name, value: open(os.path.join(cell.directory, name), "w").write(value)
    if cell.kind == "corpus":
      tokens = self.corpus_tokens
      write("stats.json", json.dumps({"size": "tiny", "vocab_size": 600, "train_tokens": tokens,
                                      "validation_tokens": 2,
                                      "parts": {"train": {"c4": {"tokens": tokens}}}}))
    elif cell.kind == "pretrain":
      write("results.json", json.dumps({"step": 2, "eval": {"mlm_accuracy": self.mlm_accuracy,
                                                             "eval_time_s": len(self.ran),
                                                             **self.more_metrics}}))
      row = {"split": "train", "steps_per_sec": 2.0, "tokens_per_sec": 256.0,
             "model_flops_per_sec": 256.0 * 1e6}
      write("metrics.jsonl", json.dumps(row) + "\n")
    else:
      write("results.json", json.dumps({"eval": {"dev": {"accuracy":
                                                         SCORES[cell.arm][cell.seed]}}}))
    return 0


def test_cells_of_a_table_are_its_grid(tmp_path):
  cells = grid.cells(TABLE, "tiny", str(tmp_path))
  assert [c.key for c in cells] == [
      "corpus", "pretrain/a", "pretrain/b",
      *[f"finetune/{a}/sst2/seed{s}" for a in "ab" for s in range(3)]]
  pretrain = cells[1]
  assert pretrain.needs == ("corpus",) and pretrain.command[:3] == ("python", "-m",
                                                                    "bertjax.main")
  assert "--gin_file=gin/objectives/mlm_nsp.gin" in pretrain.command
  assert "--gin_bindings=Trainer.num_train_steps = 2" in pretrain.command
  finetune = cells[3]
  assert finetune.needs == ("pretrain/a",) and finetune.fresh
  assert f"--checkpoint={tmp_path}/a/pretrain" in finetune.command
  assert "--seed=0" in finetune.command


def test_run_resume_and_report(tmp_path):
  cells = grid.cells(TABLE, "tiny", str(tmp_path))
  fake = FakeCommands(fail={"pretrain/b"})
  status = grid.run(cells, log=lambda m: None, execute=fake)
  assert status["failed"] == ["pretrain/b"]
  assert status["blocked"] == [f"finetune/b/sst2/seed{s}" for s in range(3)]
  assert not cells[2].done()
  # The second sitting runs only what is missing: the failed cell and those waiting on it.
  fake = FakeCommands()
  status = grid.run(cells, log=lambda m: None, execute=fake)
  assert fake.ran == ["pretrain/b"] + [f"finetune/b/sst2/seed{s}" for s in range(3)]
  record = cells[2].record()
  assert record["attempts"] == 2 and record["steps"] == 2 and record["tokens"] == 256
  assert record["flops"] == pytest.approx(256 * 1e6)
  # A third finds everything done.
  fake = FakeCommands()
  assert len(grid.run(cells, log=lambda m: None, execute=fake)["skipped"]) == len(cells)
  assert fake.ran == []
  # A cell killed mid-run (output, no marker) is redone from an emptied folder.
  killed = cells[4]
  os.remove(killed.marker)
  open(os.path.join(killed.directory, "partial"), "w").close()
  fake = FakeCommands()
  grid.run(cells, log=lambda m: None, execute=fake)
  assert fake.ran == [killed.key] and not os.path.exists(os.path.join(killed.directory,
                                                                      "partial"))
  # results.md: mean ± sample std over seeds, and the difference from the first arm.
  assert report.scores(cells, "a", TASK, TASK.metric) == pytest.approx([60.0, 70.0, 80.0])
  text = report.markdown(TABLE, "tiny", cells, "python -m bertjax.tables toy --scale=tiny")
  assert "| A | 70.0 ± 10.0 (3) |" in text and "| B | 50.0 ± 0.0 (3) |" in text
  se = math.sqrt(100 / 3)
  assert f"| B | {-20:+.1f} ± {se:.1f} (worse) |" in text
  assert "9 of 9 cells done" in text and f"{str(tmp_path)}" not in text.split("```")[-2]
  assert report.plot_scores(TABLE, "tiny", cells, str(tmp_path / "p.png"))


def test_a_fresh_machine_restores_finished_cells_from_the_ledger(tmp_path):
  book = str(tmp_path / "toy.cells.json")
  first = grid.cells(TABLE, "tiny", str(tmp_path / "machine1"))
  # The first sitting finishes arm a (pretraining and its fine-tunings) and pretrains b.
  sitting = FakeCommands(fail={f"finetune/b/sst2/seed{s}" for s in range(3)})
  grid.run(first, log=lambda m: None, execute=sitting,
           on_done=lambda cell: ledger.record(book, [cell]))
  assert sorted(ledger.load(book)) == sorted(["corpus", "pretrain/a", "pretrain/b"] +
                                             [f"finetune/a/sst2/seed{s}" for s in range(3)])
  # A fresh machine (an empty out folder) keeps arm a's results; arm b's fine-tunings need
  # its checkpoint, so b is pretrained again, and so is the corpus it reads.
  second = grid.cells(TABLE, "tiny", str(tmp_path / "machine2"))
  # Records without a recipe (as the first sitting's) match wherever they were made.
  assert grid.stale(second, str(tmp_path / "machine2"), ledger.load(book)) == []
  restored = ledger.restore(book, second)
  assert sorted(restored) == ["finetune/a/sst2/seed0", "finetune/a/sst2/seed1",
                              "finetune/a/sst2/seed2", "pretrain/a"]
  assert second[1].record() == ledger.load(book)["pretrain/a"]
  sitting = FakeCommands()
  grid.run(second, log=lambda m: None, execute=sitting,
           on_done=lambda cell: ledger.record(book, [cell]))
  assert sitting.ran == ["corpus", "pretrain/b"] + [f"finetune/b/sst2/seed{s}" for s in range(3)]
  text = report.markdown(TABLE, "tiny", second, "cmd")
  assert "9 of 9 cells done" in text and "rebuilt in a later sitting" not in text
  assert "earlier_builds" not in ledger.load(book)["corpus"]


def _two_sittings(tmp_path, first_commands, second_commands):
  """The toy table run on one machine, then on a fresh one from the ledger: (ledger path,
  the second machine's cells)."""
  book = str(tmp_path / "toy.cells.json")
  first = grid.cells(TABLE, "tiny", str(tmp_path / "machine1"))
  grid.run(first, log=lambda m: None, execute=first_commands,
           on_done=lambda cell: ledger.record(book, [cell]))
  second = grid.cells(TABLE, "tiny", str(tmp_path / "machine2"))
  ledger.restore(book, second)
  grid.run(second, log=lambda m: None, execute=second_commands,
           on_done=lambda cell: ledger.record(book, [cell]))
  return book, second


def test_a_corpus_rebuilt_differently_is_reported_not_mixed_in_silently(tmp_path, capsys):
  """A fresh machine that rebuilds the corpus and gets another one (a vocabulary trained
  differently) says so, and the results file says which cells may mix the two builds."""
  book, second = _two_sittings(tmp_path, FakeCommands(fail={"pretrain/b"}),
                               FakeCommands(corpus_tokens=11))
  assert "WARNING: corpus was rebuilt differently" in capsys.readouterr().out
  corpus = ledger.load(book)["corpus"]
  assert corpus["train_tokens"] == 11
  assert corpus["earlier_builds"] == [{"part_tokens": {"c4": 10}}]
  # Recording again (the end of every sitting) keeps the note, in the ledger and the marker.
  ledger.record(book, second)
  assert ledger.load(book)["corpus"]["earlier_builds"] == [{"part_tokens": {"c4": 10}}]
  assert second[0].record()["earlier_builds"] == [{"part_tokens": {"c4": 10}}]
  text = report.markdown(TABLE, "tiny", second, "cmd")
  assert "rebuilt in a later sitting with another vocabulary** (earlier build: 10 train" in text


@pytest.mark.parametrize("rerun_accuracy, more_metrics, differs", [
    (0.25 * (1 + 1e-5), None, False), (0.25, {"mlm_loss": 6.0}, False), (0.3, None, True)])
def test_a_pretraining_run_again_with_other_results_is_reported(
    tmp_path, capsys, rerun_accuracy, more_metrics, differs):
  """A fresh machine pretrains arm b again for its unfinished fine-tuning; its seeds 0 and 1
  were fine-tuned from the first sitting's model. A rerun that ends elsewhere (beyond float
  noise; timings aside, and metrics only a later version reports) is printed, kept in the
  ledger and named in the results file."""
  sitting = FakeCommands(mlm_accuracy=rerun_accuracy, more_metrics=more_metrics)
  book, second = _two_sittings(tmp_path, FakeCommands(fail={"finetune/b/sst2/seed2"}),
                               sitting)
  ledger.record(book, second)
  assert sitting.ran == ["corpus", "pretrain/b", "finetune/b/sst2/seed2"]
  warned = "WARNING: pretrain/b was rebuilt differently" in capsys.readouterr().out
  entries = ledger.load(book)
  text = report.markdown(TABLE, "tiny", second, "cmd")
  assert warned == differs
  assert ("**pretrain/b was run again in a later sitting" in text) == differs
  assert all("earlier_builds" not in entries[k] for k in entries if k != "pretrain/b")
  if differs:
    assert entries["pretrain/b"]["earlier_builds"] == [{"eval": {"mlm_accuracy": 0.25}}]
    assert second[2].record()["earlier_builds"] == entries["pretrain/b"]["earlier_builds"]
    assert "(earlier: mlm_accuracy 0.25; now: mlm_accuracy 0.3)" in text
  else:
    assert "earlier_builds" not in entries["pretrain/b"]


def test_a_changed_scale_is_refused_until_its_old_results_are_moved_aside(tmp_path, capsys):
  """Cells finished under another recipe (here: more pretraining steps) are not mixed into
  the table: the run stops, naming each changed cell and what changed."""
  from bertjax.tables import __main__ as cli, catalog
  out, results = tmp_path / "out", tmp_path / "toy.md"
  args = ["toy", "--scale=tiny", f"--out={out}", f"--results={results}"]
  longer = dataclasses.replace(TABLE, scales={"tiny": dataclasses.replace(
      TABLE.scale("tiny"), pretrain={**TABLE.scale("tiny").pretrain, "num_train_steps": 3})})
  with mock.patch.dict(catalog.TABLES, {"toy": TABLE}):
    assert cli.main(args, execute=FakeCommands()) == 0
    assert grid.stale(grid.cells(TABLE, "tiny", str(out)), str(out),
                      ledger.load(str(tmp_path / "toy.cells.json"))) == []
  with mock.patch.dict(catalog.TABLES, {"toy": longer}):
    assert cli.main(args, execute=FakeCommands()) == 2
    error = capsys.readouterr().err
    assert "pretrain/a: was ['--gin_bindings=Trainer.num_train_steps = 2'], now " \
        "['--gin_bindings=Trainer.num_train_steps = 3']" in error
    assert "finetune/a/sst2/seed0: made from a changed cell" in error
    assert "corpus" not in error.split("recipes:", 1)[1]
    # Moved aside, the new recipe runs from scratch.
    os.rename(out, tmp_path / "old")
    os.rename(tmp_path / "toy.cells.json", tmp_path / "old.cells.json")
    fake = FakeCommands()
    assert cli.main(args, execute=fake) == 0 and "pretrain/a" in fake.ran


def test_a_sitting_ends_at_its_time_limit_and_the_next_goes_on(tmp_path):
  """With a deadline no cell starts after it and the running one gets the time left as its
  timeout (a clock the fake commands advance); stopped cells are not failures, and the
  next sitting runs exactly what is left."""
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
  with mock.patch.object(grid.time, "time", lambda: clock[0]):
    status = grid.run(cells, log=lambda m: None, execute=Timed(), deadline=1025.0)
  assert given == {"corpus": 25.0, "pretrain/a": 15.0, "pretrain/b": 5.0}
  assert status["ran"] == ["corpus", "pretrain/a"] and status["failed"] == []
  assert status["out_of_time"] == ["pretrain/b"] + [f"finetune/a/sst2/seed{s}" for s in range(3)]
  assert status["blocked"] == [f"finetune/b/sst2/seed{s}" for s in range(3)]
  assert not cells[2].done()
  later = FakeCommands()
  status = grid.run(cells, log=lambda m: None, execute=later)
  assert later.ran == ["pretrain/b"] + [f"finetune/{a}/sst2/seed{s}" for a in "ab"
                                        for s in range(3)]
  assert status["out_of_time"] == [] and status["skipped"] == ["corpus", "pretrain/a"]


def test_a_cell_failing_on_its_own_at_the_deadline_is_a_failure(tmp_path):
  """Only a cell its timeout stopped is out of time; one that exits non-zero, even with the
  deadline passed meanwhile, is reported as failed (its log says why)."""
  clock = [1000.0]

  def crashes_late(cell, out, timeout=None):
    clock[0] += 60
    return 1

  cells = grid.cells(TABLE, "tiny", str(tmp_path))
  with mock.patch.object(grid.time, "time", lambda: clock[0]):
    status = grid.run(cells, log=lambda m: None, execute=crashes_late, deadline=1030.0)
  assert status["failed"] == ["corpus"] and status["ran"] == []
  assert status["out_of_time"] == []
  assert status["blocked"] == [c.key for c in cells[1:]]


def test_a_command_past_its_timeout_is_stopped(tmp_path):
  cell = grid.Cell("pretrain/a", "pretrain", str(tmp_path / "a"),
                   ("python", "-c", "import time; time.sleep(60)"))
  os.makedirs(cell.directory)
  with open(tmp_path / "log", "w") as out:
    assert grid.run_command(cell, out, timeout=1) == "timeout"
  logged = []
  assert grid.run_cell(cell, logged.append, timeout=1) == "out_of_time"
  assert logged[0].startswith("STOPPED pretrain/a at the sitting's time limit after 1 s (it "
                              "resumes from its last checkpoint)") and not cell.done()


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


def test_versus_calls_small_differences_noise():
  assert report.versus([70.0, 72.0, 74.0], [71.0, 73.0, 75.0]).endswith("(within noise)")
  assert report.versus([70.0], [71.0]) == "-"


def test_results_commands_paste_into_a_shell_as_the_cells_ran_them(tmp_path):
  """Every cell command results.md lists, run through bash with $OUT set, gives back the
  cell's own argv (gin bindings with spaces and quotes included)."""
  from bertjax.tables import catalog
  out = str(tmp_path / "out")
  cells = [c for table in catalog.TABLES.values() for c in grid.cells(table, "cpu", out)]
  text = report.markdown(bert.TABLE5, "cpu", grid.cells(bert.TABLE5, "cpu", out), "cmd")
  listed = text.split("Each cell", 1)[1].split("```")[1].strip().splitlines()
  assert len(listed) == len(grid.cells(bert.TABLE5, "cpu", out))
  lines = listed + [" ".join(report.shell_word(a.replace(out, "$OUT")) for a in c.command)
                    for c in cells]
  script = "".join(f"printf '%s\\0' {line.split(' ', 1)[1]}; printf '\\1'\n" for line in lines)
  ran = subprocess.run(["bash"], input=script.encode(), env={"OUT": out},
                       capture_output=True, check=True).stdout.decode()
  argvs = [a.split("\0")[:-1] for a in ran.split("\1")[:-1]]
  want = [list(c.command[1:]) for c in grid.cells(bert.TABLE5, "cpu", out) + cells]
  assert argvs == want
  assert any(" = " in a and "'" in a for argv in argvs for a in argv)


def test_every_table_has_the_three_scales_and_paper_configs_parse(tmp_path):
  from bertjax.tables import __main__ as cli, catalog
  for table in catalog.TABLES.values():
    assert {"tiny", "cpu", "paper"} <= set(table.scales)
    assert not table.scale("paper").runnable
  files = cli.write_paper_configs(bert.TABLE5, str(tmp_path))
  assert [os.path.basename(f) for f in files] == ["mlm_nsp.gin", "no_nsp.gin", "ltr.gin"]
  cli.validate_paper_configs(files)


def test_arms_after_others_and_custom_cells_are_checked(tmp_path):
  import dataclasses
  student = Arm("student", "S", ("models/bert_base.gin", "objectives/distilbert_distill.gin"),
                ("teacher_dir = '{out}/a/pretrain'",), after=("a",))
  table = dataclasses.replace(TABLE, arms=TABLE.arms[:1] + (student,))
  cells = {c.key: c for c in grid.cells(table, "tiny", str(tmp_path))}
  assert cells["pretrain/student"].needs == ("corpus", "pretrain/a")
  assert f"--gin_bindings=teacher_dir = '{tmp_path}/a/pretrain'" in (
      cells["pretrain/student"].command)
  # A table's own cell builder is checked: a cell before what it needs is refused.
  backwards = lambda t, scale, out: list(reversed(grid.pretrain_then_finetune(t, scale, out)))
  with pytest.raises(ValueError, match="do not come before it"):
    grid.cells(dataclasses.replace(TABLE, cells=backwards), "tiny", str(tmp_path))
  # Arms without a pretraining cell (students trained from scratch) and a table's own
  # report section.
  def students_only(t, scale, out):
    return [dataclasses.replace(grid.finetune_cell(scale, arm, TASK, 0, out), needs=())
            for arm in t.arms]
  custom = dataclasses.replace(TABLE, cells=students_only,
                               report=lambda t, scale, cells: ["## Speed", "", "fast"])
  text = report.markdown(custom, "tiny", grid.cells(custom, "tiny", str(tmp_path)), "cmd")
  assert "## Pretraining" not in text and "## Speed\n\nfast" in text  # nothing pretrained
  mixed = dataclasses.replace(custom, cells=lambda t, scale, out: [
      grid.pretrain_cell(scale, t.arms[0], out, None)] + students_only(t, scale, out))
  text = report.markdown(mixed, "tiny", grid.cells(mixed, "tiny", str(tmp_path)), "cmd")
  assert "| A | not done |" in text and "| B | no pretraining |" in text


def _pretraining_configs():
  from bertjax.tables import catalog  # pylint: disable=g-import-not-at-top
  for table in catalog.TABLES.values():
    for scale in ("tiny", "cpu"):
      for cell in grid.cells(table, scale, "/nonexistent/out"):
        if cell.kind == "pretrain" and cell.command[2] == "bertjax.main":
          yield pytest.param(cell, id=f"{table.name}-{scale}-{cell.arm}")


@pytest.mark.parametrize("cell", list(_pretraining_configs()))
def test_every_arm_pretraining_config_parses_and_builds_its_model(cell):
  """Every arm at every runnable scale (the README's tiny runs train only some arms): its
  gin files and bindings parse, and its model builds at the scale's sizes."""
  import gin  # pylint: disable=g-import-not-at-top
  from bertjax import configurables, main  # pylint: disable=g-import-not-at-top
  value = lambda prefix: [a[len(prefix):] for a in cell.command if a.startswith(prefix)]
  gin.clear_config()
  try:
    main.parse_gin(value("--gin_file="), value("--gin_bindings="))
    for scope in ("", "student/", "teacher/"):
      try:
        gin.query_parameter(f"{scope}build_model.config")
      except ValueError:
        continue
      with gin.config_scope(scope.rstrip("/") or None):
        assert configurables.build_model() is not None
  finally:
    gin.clear_config()


def test_cells_share_the_table_folders_compilation_cache(tmp_path, monkeypatch):
  """A command run with `compilation_cache` keeps its compiled programs there: the second
  run of the same program finds it (JAX's persistent cache, given through the environment);
  a cache the user names wins."""
  program = ("import jax, jax.numpy as jnp; "
             "jax.jit(lambda x: jnp.sin(x) @ x.T)(jnp.ones((64, 64))).block_until_ready(); "
             "print('cache', jax.config.jax_compilation_cache_dir)")
  cell = grid.Cell("speed/a", "speed", str(tmp_path / "a"), ("python", "-c", program))
  os.makedirs(cell.directory)
  cache = tmp_path / "out" / grid.COMPILATION_CACHE
  monkeypatch.setenv("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")
  monkeypatch.delenv("JAX_COMPILATION_CACHE_DIR", raising=False)
  with open(tmp_path / "log", "w") as out:
    assert grid.run_command(cell, out, compilation_cache=str(cache)) == 0
  entries = os.listdir(cache)
  assert any(e.startswith("jit_") for e in entries), entries
  assert f"cache {cache}" in (tmp_path / "log").read_text()
  mine = tmp_path / "mine"
  monkeypatch.setenv("JAX_COMPILATION_CACHE_DIR", str(mine))
  with open(tmp_path / "log", "w") as out:
    assert grid.run_command(cell, out, compilation_cache=str(cache)) == 0
  assert f"cache {mine}" in (tmp_path / "log").read_text() and os.listdir(mine)
  assert sorted(os.listdir(cache)) == sorted(entries)


def test_the_command_gives_its_cells_the_table_folders_cache(tmp_path, monkeypatch):
  from bertjax.tables import __main__ as cli, catalog
  given = []

  def run_command(cell, out, timeout=None, compilation_cache=None):
    given.append(compilation_cache)
    return FakeCommands()(cell, out)

  monkeypatch.setattr(grid, "run_command", run_command)
  out = tmp_path / "out"
  with mock.patch.dict(catalog.TABLES, {"toy": TABLE}):
    assert cli.main(["toy", "--scale=tiny", f"--out={out}",
                     f"--results={tmp_path / 'toy.md'}"]) == 0
  assert given and set(given) == {str(out / grid.COMPILATION_CACHE)}


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
  monkeypatch.setattr(grid.os, "sched_getaffinity", lambda pid: {0, 1, 2, 3})
  cells = grid.cells(TABLE, "tiny", str(tmp_path))
  fake = Concurrent(meet=("pretrain/a", "pretrain/b"))
  status = grid.run(cells, log=lambda m: None, execute=fake, workers=2)
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
  monkeypatch.setattr(grid.os, "sched_getaffinity", lambda pid: {0, 1})
  cells = grid.cells(TABLE, "tiny", str(tmp_path))
  status = grid.run(cells, log=lambda m: None, execute=Concurrent(fail={"pretrain/b"}),
                    workers=2)
  assert status["failed"] == ["pretrain/b"]
  assert status["blocked"] == [f"finetune/b/sst2/seed{s}" for s in range(3)]
  assert sorted(status["ran"]) == sorted(["corpus", "pretrain/a"] + [
      f"finetune/a/sst2/seed{s}" for s in range(3)])


def test_a_timing_cell_runs_alone_on_every_core(tmp_path, monkeypatch):
  monkeypatch.setattr(grid.os, "sched_getaffinity", lambda pid: {0, 1})
  speed = grid.Cell("speed", "speed", str(tmp_path / "speed"), ("python", "-c", "pass"),
                    needs=("pretrain/a",))
  cells = grid.cells(TABLE, "tiny", str(tmp_path))
  cells = cells[:2] + [speed] + cells[2:]
  fake = Concurrent(slow={"pretrain/b", "speed"})  # both would be running when speed is ready
  grid.run(cells, log=lambda m: None, execute=fake, workers=2)
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
    assert grid.run_command(cell, out, cpus=frozenset({core})) == 0
  assert f"cores [{core}]" in (tmp_path / "log").read_text()


def test_workers_beyond_the_cores_fail_with_advice(monkeypatch):
  monkeypatch.setattr(grid.os, "sched_getaffinity", lambda pid: {0, 1})
  with pytest.raises(ValueError, match=r"--workers=3: more cells at once than the 2 cores "
                                       r"this process may use \(\[0, 1\]\); use at most "
                                       r"--workers=2"):
    grid.cpu_slots(3)
  with pytest.raises(ValueError, match="--workers=0: run at least one cell at a time"):
    grid.cpu_slots(0)
  assert grid.cpu_slots(1) == [None]


def test_the_command_passes_workers_on(tmp_path, monkeypatch):
  from bertjax.tables import __main__ as cli, catalog
  monkeypatch.setattr(grid.os, "sched_getaffinity", lambda pid: {0, 1})
  fake = Concurrent(meet=("pretrain/a", "pretrain/b"))
  out = tmp_path / "out"
  with mock.patch.dict(catalog.TABLES, {"toy": TABLE}):
    assert cli.main(["toy", "--scale=tiny", f"--out={out}", f"--results={tmp_path / 'r.md'}",
                     "--workers=2"], execute=fake) == 0
    with pytest.raises(ValueError, match="--workers=5: more cells at once"):
      cli.main(["toy", "--scale=tiny", f"--out={tmp_path / 'other'}", "--workers=5"],
               execute=fake)
  assert fake.cores["pretrain/a"] in ({0}, {1}) and not (tmp_path / "other").exists()
