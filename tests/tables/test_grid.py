"""A table's cells, done-markers, resumption over sittings and the ledger, aggregation
(commands faked)."""
import dataclasses
import math
import os
import subprocess
from unittest import mock

import pytest

from bertjax.tables import bert, grid, ledger, report, runner
from bertjax.tables.spec import Arm
from tests.tables.toy import TABLE, TASK, FakeCommands


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
  status = runner.run(cells, log=lambda m: None, execute=fake)
  assert status["failed"] == ["pretrain/b"]
  assert status["blocked"] == [f"finetune/b/sst2/seed{s}" for s in range(3)]
  assert not cells[2].done()
  # The second sitting runs only what is missing: the failed cell and those waiting on it.
  fake = FakeCommands()
  status = runner.run(cells, log=lambda m: None, execute=fake)
  assert fake.ran == ["pretrain/b"] + [f"finetune/b/sst2/seed{s}" for s in range(3)]
  record = cells[2].record()
  assert record["attempts"] == 2 and record["steps"] == 2 and record["tokens"] == 256
  assert record["flops"] == pytest.approx(256 * 1e6)
  # A third finds everything done.
  fake = FakeCommands()
  assert len(runner.run(cells, log=lambda m: None, execute=fake)["skipped"]) == len(cells)
  assert fake.ran == []
  # A cell killed mid-run (output, no marker) is redone from an emptied folder.
  killed = cells[4]
  os.remove(killed.marker)
  open(os.path.join(killed.directory, "partial"), "w").close()
  fake = FakeCommands()
  runner.run(cells, log=lambda m: None, execute=fake)
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
  runner.run(first, log=lambda m: None, execute=sitting,
             on_done=lambda cell: ledger.record(book, [cell]))
  assert sorted(ledger.load(book)) == sorted(["corpus", "pretrain/a", "pretrain/b"] +
                                             [f"finetune/a/sst2/seed{s}" for s in range(3)])
  # A fresh machine (an empty out folder) keeps arm a's results; arm b's fine-tunings need
  # its checkpoint, so b is pretrained again, and so is the corpus it reads.
  second = grid.cells(TABLE, "tiny", str(tmp_path / "machine2"))
  # Records without a recipe (as the first sitting's) match wherever they were made.
  assert runner.stale(second, str(tmp_path / "machine2"), ledger.load(book)) == []
  restored = ledger.restore(book, second)
  assert sorted(restored) == ["finetune/a/sst2/seed0", "finetune/a/sst2/seed1",
                              "finetune/a/sst2/seed2", "pretrain/a"]
  assert second[1].record() == ledger.load(book)["pretrain/a"]
  sitting = FakeCommands()
  runner.run(second, log=lambda m: None, execute=sitting,
             on_done=lambda cell: ledger.record(book, [cell]))
  assert sitting.ran == ["corpus", "pretrain/b"] + [f"finetune/b/sst2/seed{s}" for s in range(3)]
  text = report.markdown(TABLE, "tiny", second, "cmd")
  assert "9 of 9 cells done" in text and "rebuilt in a later sitting" not in text
  assert "earlier_builds" not in ledger.load(book)["corpus"]


def test_a_restored_run_that_a_table_sharing_the_folder_needs_runs_again(tmp_path):
  """On a fresh machine, a table's ledger restores arm a's pretraining (its fine-tunings are
  done), which holds no checkpoint here. A table sharing the folder that still needs that
  pretraining (for another task) takes the marker back, and the corpus's: both run again."""
  folder, book = str(tmp_path / "shared"), str(tmp_path / "toy.cells.json")
  first = grid.cells(TABLE, "tiny", str(tmp_path / "machine1"))
  runner.run(first, log=lambda m: None, execute=FakeCommands(),
             on_done=lambda cell: ledger.record(book, [cell], first))
  toy = grid.cells(TABLE, "tiny", folder)
  assert len(ledger.restore(book, toy)) == len(toy)
  with_rte = dataclasses.replace(
      TABLE, name="toy_rte", arms=TABLE.arms[:1],
      scales={"tiny": dataclasses.replace(TABLE.scale("tiny"), tasks=None)})
  cells = grid.cells(with_rte, "tiny", folder)
  assert ledger.restore(str(tmp_path / "toy_rte.cells.json"), cells) == []
  assert not cells[0].done() and not cells[1].done()  # corpus, pretrain/a taken back
  assert os.listdir(cells[1].directory) == []
  commands = FakeCommands()
  runner.run(cells, log=lambda m: None, execute=commands)
  assert commands.ran == ["corpus", "pretrain/a"] + [f"finetune/a/rte/seed{s}" for s in range(3)]
  # The toy table's own restore leaves the markers that ran here alone.
  assert ledger.restore(book, toy) == [] and all(c.done() for c in toy)
  assert not os.path.exists(os.path.join(cells[1].directory, ledger.RESTORED))


def _two_sittings(tmp_path, first_commands, second_commands):
  """The toy table run on one machine, then on a fresh one from the ledger: (ledger path,
  the second machine's cells)."""
  book = str(tmp_path / "toy.cells.json")
  first = grid.cells(TABLE, "tiny", str(tmp_path / "machine1"))
  runner.run(first, log=lambda m: None, execute=first_commands,
             on_done=lambda cell: ledger.record(book, [cell], first))
  second = grid.cells(TABLE, "tiny", str(tmp_path / "machine2"))
  ledger.restore(book, second)
  runner.run(second, log=lambda m: None, execute=second_commands,
             on_done=lambda cell: ledger.record(book, [cell], second))
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


def test_a_corpus_rebuilt_differently_before_any_cell_used_it_is_no_mix(tmp_path, capsys):
  """Only the corpus was finished when the first machine stopped: a rebuild that comes out
  otherwise on a fresh machine mixes nothing, so it is neither warned of nor reported."""
  pretrainings = {"pretrain/a", "pretrain/b"}
  book, second = _two_sittings(tmp_path, FakeCommands(fail=pretrainings),
                               FakeCommands(corpus_tokens=11))
  assert "WARNING" not in capsys.readouterr().out
  corpus = ledger.load(book)["corpus"]
  assert corpus["train_tokens"] == 11 and "earlier_builds" not in corpus
  assert "rebuilt in a later sitting" not in report.markdown(TABLE, "tiny", second, "cmd")


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
    assert runner.stale(grid.cells(TABLE, "tiny", str(out)), str(out),
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
