"""The progress bar of long jobs (`bertjax.progress`): it counts finished work, names what
runs meanwhile, and prints other lines above itself; a table's runner shows one over its
cells."""
from bertjax import progress
from bertjax.tables import grid, runner
from tests.tables.toy import TABLE, FakeCommands


def test_the_bar_counts_finished_work_and_names_what_runs(capsys):
  with progress.Progress(4, initial=1, desc="train", show=True) as bar:
    with bar.phase("compiling"):
      assert "train (compiling)" in capsys.readouterr().err
    bar.advance(3, {"loss": 0.5})
    bar.advance(2)  # a step never goes back
    assert bar.done == 3
    bar.running("cell a, cell b")
    bar.print("a line above the bar")
  captured = capsys.readouterr()
  assert "train (cell a, cell b)" in captured.err and "3/4" in captured.err
  assert "loss=0.5" in captured.err
  assert captured.out == "a line above the bar\n"


def test_a_hidden_bar_does_nothing_but_print(capsys):
  bar = progress.Progress(4, show=False)
  with bar.phase("compiling"):
    bar.advance(2)
  bar.running("x")
  bar.print("still printed")
  bar.close()
  assert bar.done == 0 and not bar.shown
  assert capsys.readouterr() == ("still printed\n", "")


def test_a_tables_bar_counts_its_cells_and_names_the_one_running(tmp_path, capsys):
  cells = grid.cells(TABLE, "tiny", str(tmp_path))
  status = runner.run(cells, execute=FakeCommands(), show_progress=True)
  captured = capsys.readouterr()
  assert len(status["ran"]) == len(cells)
  assert f"{len(cells)}/{len(cells)}" in captured.err
  assert "cells (corpus)" in captured.err and "cells (pretrain/a)" in captured.err
  assert "running corpus\n" in captured.out and "done corpus in 0 s\n" in captured.out
  # A second sitting starts where the first stopped: every cell is counted done.
  runner.run(cells, execute=FakeCommands(), show_progress=True)
  assert f"{len(cells)}/{len(cells)}" in capsys.readouterr().err
