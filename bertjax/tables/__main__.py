"""python -m bertjax.tables TABLE --scale=cpu [--out=DIR] [--results=FILE] [--report_only]

Pretrains every arm of TABLE, fine-tunes each on the table's tasks with several seeds and
writes the results (mean ± std over seeds, pretraining FLOPs and wall time, the exact
commands) and a plot. Resumable: run the same command again after a kill or a timeout and
finished cells are skipped, on this machine or (through the ledger committed beside the
results, `bertjax/tables/ledger.py`) on a fresh one. `--scale=paper` writes each arm's
pretraining config as one gin file (OUT/<arm>.gin, for a TPU pod) and checks that it
parses; a table that builds its own cells (no pretraining) gets its cells' commands
instead, as one shell script (OUT/commands.sh), each checked against its module's flags;
nothing runs. `--hours=H` ends the sitting after H hours (no cell starts later; the one
running is stopped), exit status 3, so that a table can be built in fixed slots.
`python -m bertjax.tables --list [--scale=cpu]` lists the tables and how far each is.
"""
import argparse
import functools
import os
import pathlib
import re
import shlex
import sys
import tempfile
import time

from bertjax import paths, quiet, run_lock
from bertjax.cli import VERBOSITY_HELP
from bertjax.tables import catalog, grid, ledger, report, runner


# Scales whose results are kept in the repository; others (tiny: a check that the table
# runs) write under the temporary folder, leaving the repository as it was.
KEPT_SCALES = ("cpu", "gpu", "paper")


def default_out(table, scale: str) -> str:
  """experiments/<paper>/out/<folder>_<scale>: the folder the table shares with the paper's
  other tables of that folder (Table.folder), or its own. The paper's scale writes one file
  per arm and runs nothing, so each table keeps its own folder there. Other scales than
  KEPT_SCALES: the same folder under <tmp>/bertjax_tables/<paper>/."""
  folder = table.folder if table.folder and table.scale(scale).runnable else table.name
  root = (paths.REPO_ROOT / "experiments" / table.paper / "out" if scale in KEPT_SCALES
          else pathlib.Path(tempfile.gettempdir()) / "bertjax_tables" / table.paper)
  return str(root / f"{folder}_{scale}")


def default_results(table, scale: str) -> str:
  """experiments/<paper>/<table>[_<scale>].md; other scales than KEPT_SCALES: beside the
  cells' folder, under the temporary folder."""
  suffix = "" if scale == "cpu" else f"_{scale}"
  if scale not in KEPT_SCALES:
    return os.path.join(os.path.dirname(default_out(table, scale)), f"{table.name}{suffix}.md")
  return str(paths.REPO_ROOT / "experiments" / table.paper / f"{table.name}{suffix}.md")


def write_paper_configs(table, out: str) -> list[str]:
  """One gin file per arm holding its whole pretraining config at the paper's scale."""
  scale = table.scale("paper")
  os.makedirs(out, exist_ok=True)
  written = []
  for arm in table.arms:
    lines = [f"# {table.title}: arm {arm.label!r} at the paper's scale (a TPU pod).",
             "# python -m bertjax.main --gin_file=THIS_FILE --model_dir=gs://...",
             "# Bind the paper's corpus: task_dataset.source = @tfds_source() ..."]
    lines += [f"include '{f[len('gin/'):]}'" for f in grid.pretrain_gin_files(scale, arm)]
    lines += grid.pretrain_bindings(scale, arm, None)
    path = os.path.join(out, f"{arm.name}.gin")
    with open(path, "w") as f:
      f.write("\n".join(lines) + "\n")
    written.append(path)
  return written


def validate_paper_configs(files: list[str]) -> None:
  """Parses each file with every configurable registered (a bad name raises)."""
  import gin  # pylint: disable=g-import-not-at-top
  from bertjax import main  # pylint: disable=g-import-not-at-top
  for path in files:
    gin.clear_config()
    main.parse_gin([path], [])
  gin.clear_config()


def write_paper_commands(table, out: str) -> str:
  """A table with its own cells at the paper's scale: every cell's command, in running
  order, as one shell script."""
  os.makedirs(out, exist_ok=True)
  path = os.path.join(out, "commands.sh")
  lines = ["#!/usr/bin/env bash", f"# {table.title}: every cell at the paper's scale, in order.",
           *[f"# {n}" for n in table.notes], "set -euo pipefail"]
  for cell in grid.cells(table, "paper", out):
    lines += [f"# {cell.key}", " ".join(map(report.shell_word, cell.command))]
  with open(path, "w") as f:
    f.write("\n".join(lines) + "\n")
  return path


def validate_paper_commands(path: str) -> None:
  """Parses every `python -m MODULE FLAGS` line of `path` with MODULE's own flag set (an
  unknown or malformed flag raises)."""
  import importlib  # pylint: disable=g-import-not-at-top
  with open(path) as f:
    commands = [shlex.split(line) for line in f if line.startswith("python -m ")]
  for command in commands:
    module = importlib.import_module(command[2])
    try:
      module.FLAGS(command[2:])
    finally:
      module.FLAGS.unparse_flags()


def stale_message(table, changed: list, out: str, ledger_file: str) -> str:
  lines = [f"[{table.name}] {len(changed)} finished cells were run with other commands than "
           f"the table now gives them (its scale or arms changed since); their results would "
           f"mix two recipes:"]
  for key, was, now in changed:
    old, new = (set(re.split(r" (?=--)", r)) for r in (was, now))  # one entry per flag
    lines.append(f"  {key}: was {sorted(old - new)}, now {sorted(new - old)}" if old != new
                 else f"  {key}: made from a changed cell")
  lines.append(f"Keep the old results elsewhere: move {out} and {ledger_file} aside (or give "
               f"--out and --results new paths), then run again.")
  return "\n".join(lines)


def progress(table, scale: str) -> str:
  """How far the table is at `scale`, from its ledger (any machine's sittings) and this
  machine's done-markers: cells done, their recorded wall time, cells left."""
  if scale not in table.scales or not table.scale(scale).runnable:
    return f"{scale}: not run here"
  cells = grid.cells(table, scale, default_out(table, scale))
  entries = ledger.load(ledger.path_for(default_results(table, scale)))
  done = [c for c in cells if c.key in entries or c.done()]
  hours = sum((entries.get(c.key) or c.record() or {}).get("wall_s_all_attempts", 0)
              for c in done) / 3600
  return (f"{scale}: {len(done)} of {len(cells)} cells done ({hours:.1f} h recorded), "
          f"{len(cells) - len(done)} left")


def parse_args(argv):
  parser = argparse.ArgumentParser(prog="python -m bertjax.tables", description=__doc__,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("table", nargs="?", help=f"one of {sorted(catalog.TABLES)}")
  parser.add_argument("--scale", default="cpu", help="tiny | cpu | gpu | paper")
  parser.add_argument("--out", "--output_dir", dest="out",
                      help="folder of the cells (default experiments/<paper>/out/...; at the "
                           "tiny scale, a folder under the system's temporary folder)")
  parser.add_argument("--results", help="results markdown (default experiments/<paper>/...; "
                                        "at the tiny scale, beside the cells)")
  parser.add_argument("--report_only", action="store_true", help="only rewrite the results")
  parser.add_argument("--list", action="store_true", help="list the tables and exit")
  parser.add_argument("--hours", type=float,
                      help="this sitting's time limit: no cell starts after it, and the one "
                           "running then is stopped (a pretraining resumes from its last "
                           "checkpoint); run the same command again to go on")
  parser.add_argument("--workers", type=int, default=1,
                      help="cells run at once, each pinned to its share of the cores (on a "
                           "2-core machine, 2 single-core cells finish about 1.4x as many "
                           "steps as one cell on both cores); timings still run alone")
  parser.add_argument("--verbosity", "-v", type=int, default=None, help=VERBOSITY_HELP)
  return parser.parse_args(argv)


def main(argv=None, execute=None) -> int:
  """The command; `execute(cell, log_file)` runs one cell (default: its subprocess, with the
  table folder's compilation cache).
  Exit status: 0 the table is done, 1 a cell failed (or, from `cli`, the command was
  refused: the message says why), 2 finished cells are stale, 3 the sitting's `--hours` ran
  out first."""
  start = time.time()
  args = parse_args(sys.argv[1:] if argv is None else argv)
  quiet.configure(args.verbosity is not None)
  if args.hours is not None and args.hours <= 0:
    raise ValueError(f"--hours={args.hours}: give a positive time limit for this sitting.")
  runner.cpu_slots(args.workers)  # a count this machine cannot pin fails before any work
  if args.list or not args.table:
    for name, table in sorted(catalog.TABLES.items()):
      print(f"{name}: {table.title} (scales: {', '.join(table.scales)})\n"
            f"  {progress(table, args.scale)}")
    return 0
  table = catalog.get(args.table)
  scale = table.scale(args.scale)
  out = os.path.abspath(args.out or default_out(table, args.scale))
  command = "python -m bertjax.tables " + " ".join(shlex.quote(a) for a in (
      [args.table, f"--scale={args.scale}"] + ([f"--out={args.out}"] if args.out else [])))
  if not scale.runnable and table.cells is not None:
    script = write_paper_commands(table, out)
    validate_paper_commands(script)
    print(f"Wrote and parsed: {script}")
    return 0
  if not scale.runnable:
    files = write_paper_configs(table, out)
    validate_paper_configs(files)
    print("Wrote and parsed:\n  " + "\n  ".join(files))
    return 0
  cells = grid.cells(table, args.scale, out)
  execute = execute or functools.partial(
      runner.run_command, compilation_cache=os.path.join(out, runner.COMPILATION_CACHE))
  results = os.path.abspath(args.results or default_results(table, args.scale))
  os.makedirs(os.path.dirname(results), exist_ok=True)
  log = lambda m: print(f"[{table.name}] {m}", flush=True)
  ledger_file = ledger.path_for(results)
  changed = runner.stale(cells, out, ledger.load(ledger_file))
  if changed:
    print(stale_message(table, changed, out, ledger_file), file=sys.stderr)
    return 2
  restored = ledger.restore(ledger_file, cells)
  if restored:
    log(f"{len(restored)} cells finished in earlier sittings ({ledger_file})")
  status = {"failed": [], "blocked": [], "out_of_time": []}
  if not args.report_only:
    os.makedirs(out, exist_ok=True)
    with run_lock.hold(out, "tables runner", log):
      status = runner.run(cells, log=log, execute=execute,
                          on_done=lambda cell: ledger.record(ledger_file, [cell], cells),
                          table_out=out, workers=args.workers,
                          deadline=None if args.hours is None else start + args.hours * 3600)
  ledger.record(ledger_file, cells, cells)
  plot = (table.plot or report.plot_scores)(table, args.scale, cells,
                                            os.path.splitext(results)[0] + ".png")
  word_order_plot = report.plot_word_order(table, args.scale, cells,
                                           os.path.splitext(results)[0] + "_word_order.png")
  with open(results, "w") as f:
    f.write(report.markdown(table, args.scale, cells, command, plot, word_order_plot))
  print(f"[{table.name}] results: {results}" + (f", plot: {plot}" if plot else ""))
  if status["failed"]:
    print(f"[{table.name}] failed: {status['failed']}; waiting on them: {status['blocked']}")
    return 1
  if status["out_of_time"]:
    left = len(status["out_of_time"]) + len(status["blocked"])
    print(f"[{table.name}] the sitting's {args.hours:g} h are spent; {left} cells left. "
          f"Run the same command again to go on: {command}")
    return 3
  return 0


def cli() -> int:
  """main, with what it refuses said in one line (status 1)."""
  try:
    return main()
  except (ValueError, run_lock.LockError) as e:
    print(f"python -m bertjax.tables: {e}", file=sys.stderr)
    return 1


def command() -> None:
  """`bertjax tables` / `python -m bertjax.tables`."""
  sys.exit(cli())


if __name__ == "__main__":
  command()
