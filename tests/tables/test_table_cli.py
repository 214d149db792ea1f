"""The table commands of docs/tables.md, run at the tiny scale:
every cell of each table in this process (tests/helpers/cli.py), the tables that share a
folder in one folder, then again to check that a finished table is skipped."""
import os
import pathlib
import re
import shlex

import pytest

from bertjax import paths
from bertjax.tables import __main__ as tables_cli
from tests.helpers import cli, docs

def readme_table_commands() -> list[list[str]]:
  """`python -m bertjax.tables ...` lines of the docs, as argv after the module."""
  found = re.findall(r"^python -m bertjax\.tables (.*)$", docs.text(), re.M)
  return [shlex.split(line.split("  #")[0]) for line in found]


# Tables whose README command another test runs at the tiny scale (and checks further).
RUN_ELSEWHERE = {"distilbert": "tests/tables/test_distilbert.py",
                 "task_distillation": "tests/tables/test_task_distillation.py"}


def in_process(cell, out) -> int:
  try:
    out.write(cli.run_module(list(cell.command[2:])))
  except AssertionError as e:
    out.write(str(e))
    return 1
  return 0


def test_readme_lists_every_table_at_cpu_scale():
  from bertjax.tables import catalog
  commands = readme_table_commands()
  assert {c[0] for c in commands} == set(catalog.TABLES), commands
  assert all("--scale=cpu" in c for c in commands)
  for table, test_file in RUN_ELSEWHERE.items():
    source = (paths.REPO_ROOT / test_file).read_text()
    assert "readme_table_commands" in source and f'"{table}"' in source, (table, test_file)


def test_list_says_how_far_each_table_is_from_its_ledger(capsys):
  """`--list` counts each table's finished cells at the CPU scale from the committed ledger
  (a fresh machine has no done-markers), with the wall time they took."""
  from bertjax.tables import catalog, ledger  # pylint: disable=g-import-not-at-top
  assert tables_cli.main(["--list"]) == 0
  text = capsys.readouterr().out
  for name, table in catalog.TABLES.items():
    cells = tables_cli.grid.cells(table, "cpu", tables_cli.default_out(table, "cpu"))
    entries = ledger.load(ledger.path_for(tables_cli.default_results(table, "cpu")))
    done = sum(c.key in entries or c.done() for c in cells)
    assert f"{name}: {table.title}" in text
    assert f"cpu: {done} of {len(cells)} cells done (" in text, (name, text)
  # Task-level distillation is finished, every cell in its ledger, with the hours they took.
  cells = tables_cli.grid.cells(catalog.TABLES["task_distillation"], "cpu", "/nonexistent")
  hours = float(re.search(rf"cpu: {len(cells)} of {len(cells)} cells done \((\d+\.\d) h "
                          r"recorded\), 0 left", text).group(1))
  assert hours > 0.1


def test_only_the_kept_scales_write_into_the_repository():
  """A tiny run checks that a table runs: its cells and results go under the temporary
  folder, so the repository is left as it was; the CPU scale's results are kept there."""
  from bertjax.tables import catalog  # pylint: disable=g-import-not-at-top
  for table in catalog.TABLES.values():
    for scale, inside in (("tiny", False), ("cpu", True)):
      for path in (tables_cli.default_out(table, scale), tables_cli.default_results(table, scale)):
        assert pathlib.Path(path).is_relative_to(paths.REPO_ROOT) == inside, (table.name, path)


def test_tables_sharing_a_folder_give_each_shared_cell_one_command(tmp_path):
  """Tables of one paper that name the same folder (Table.folder) run a cell of one key
  once for all: at every runnable scale, its command is the same in each of them."""
  from bertjax.tables import catalog, grid  # pylint: disable=g-import-not-at-top
  groups = {}
  for table in catalog.TABLES.values():
    if table.folder:
      groups.setdefault((table.paper, table.folder), []).append(table)
  assert sorted(len(g) for g in groups.values()) == [2, 3]  # T5's two, ELECTRA's three
  for tables in groups.values():
    for scale in ("tiny", "cpu"):
      outs = {tables_cli.default_out(t, scale) for t in tables}
      assert len(outs) == 1
      commands = {}
      for table in tables:
        for cell in grid.cells(table, scale, str(tmp_path)):
          commands.setdefault(cell.key, set()).add(cell.command)
      assert all(len(c) == 1 for c in commands.values()), (
          [t.name for t in tables], scale, [k for k, c in commands.items() if len(c) > 1])


def _build_every_model(gin, configurables) -> None:
  """Builds the models a parsed config binds (a distillation's student under its scope): the
  scale's sizes must be fields its family accepts."""
  built = 0
  for scope in ("", "student"):
    try:
      gin.query_parameter(f"{scope}{'/' if scope else ''}build_model.architecture")
    except ValueError:
      continue
    with gin.config_scope(scope or None):
      configurables.build_model()
    built += 1
  assert built, "no build_model.architecture bound"


def test_every_pretraining_of_every_runnable_scale_parses(tmp_path):
  """Each table's pretraining commands at the tiny, CPU and GPU scales: their gin files and
  bindings parse with every configurable registered, and the model builds from them (a
  misspelt binding or a size its family lacks fails here, not an hour into a sitting)."""
  import gin  # pylint: disable=g-import-not-at-top
  from bertjax import configurables  # pylint: disable=g-import-not-at-top
  from bertjax import main  # pylint: disable=g-import-not-at-top
  from bertjax.tables import catalog, grid  # pylint: disable=g-import-not-at-top
  parsed = 0
  try:
    for table in catalog.TABLES.values():
      for scale in ("tiny", "cpu", "gpu"):
        for cell in grid.cells(table, scale, str(tmp_path)):
          if cell.kind == "pretrain" and cell.command[2] == "bertjax.main":
            flags = [a.split("=", 1) for a in cell.command[3:]]
            gin.clear_config()
            main.parse_gin([v for k, v in flags if k == "--gin_file"],
                           [v for k, v in flags if k == "--gin_bindings"])
            _build_every_model(gin, configurables)
            parsed += 1
  finally:
    gin.clear_config()
  assert parsed > 60


def readme_command_groups() -> list[list[list[str]]]:
  """The README's table commands (less RUN_ELSEWHERE), those of tables sharing a folder
  (Table.folder) together, in the README's order: one sitting of them runs each shared cell
  once."""
  from bertjax.tables import catalog  # pylint: disable=g-import-not-at-top
  groups = {}
  for argv in readme_table_commands():
    if argv[0] not in RUN_ELSEWHERE:
      table = catalog.get(argv[0])
      groups.setdefault(table.folder or table.name, []).append(argv)
  return list(groups.values())


@pytest.mark.slow
@pytest.mark.parametrize("group", readme_command_groups(),
                         ids=lambda group: "+".join(argv[0] for argv in group))
def test_readme_table_command_end_to_end_at_tiny_scale(group, tmp_path, capsys):
  """Each table of the group in turn, in one folder: a later table skips the cells an
  earlier one made (and the check of each cell's command against the folder's holds)."""
  from bertjax.tables import catalog, grid, runner  # pylint: disable=g-import-not-at-top
  out = tmp_path / "out"
  sittings, ran = [], set()
  for argv in group:
    argv = [a.replace("--scale=cpu", "--scale=tiny") for a in argv]
    results = tmp_path / f"{argv[0]}.md"
    sittings.append(argv + [f"--out={out}", f"--results={results}"])
    assert tables_cli.main(sittings[-1], execute=in_process) == 0
    text = results.read_text()
    assert re.search(r"(\d+) of \1 cells done", text), text
    # Every arm trained is scored (on the tiny scale's one seed: a plain number).
    assert len(re.findall(r"^\| [^|]+ \| \d+\.\d \|", text, re.M)) >= 2, text
    assert "FLOPs" in text or "## Pretraining" not in text
    cells = grid.cells(catalog.get(argv[0]), "tiny", str(out))
    # A cell an earlier table of the group made is not made again.
    running = set(re.findall(r"running (\S+)", capsys.readouterr().out))
    assert not running & ran, running & ran
    assert running <= {c.key for c in cells}
    ran |= running
    for cell in cells:
      if cell.step is not None:  # the learning curve's: from that pretraining step's weights
        assert re.search(rf", step {cell.step}\b", cell.record()["encoder"]), cell.record()
      if cell.kind == "t2t_finetune":  # every fine-tuning starts from its arm's weights
        pretrained = os.path.join(str(out), cell.arm, "pretrain")
        log = open(os.path.join(cell.directory, runner.LOG)).read()
        assert f"Initialized from {pretrained} (weights); 0 parameters new" in log, log[-2000:]
  if len(group) > 1:
    assert len(ran) < sum(len(grid.cells(catalog.get(a[0]), "tiny", str(out))) for a in group)
  # A second sitting of each finds every cell done and runs nothing.
  for args in sittings:
    assert tables_cli.main(args, execute=in_process) == 0
  assert "running" not in capsys.readouterr().out
