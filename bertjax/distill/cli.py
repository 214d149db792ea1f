"""What `python -m bertjax.distill.student`, `.speed` and `.pair_speed` share: parsing
their private flag sets (help on request, flags reset afterwards so tests can call `main`
again), turning bad input into a one-line exit message and printing the JSON report."""
import json
import sys
from typing import Callable, Optional

import jax
from absl import flags

from bertjax import cli, paths, quiet


def run_with_flags(flag_values: flags.FlagValues, run: Callable[[], dict], doc: str,
                   argv: list[str]) -> dict:
  """Parses `argv` (argv[0] is the program name) into `flag_values` (absl's logging flags,
  `--verbosity`, into its global set), then `run()`."""
  if cli.wants_help(argv):
    print(cli.help_text(doc, flag_values))
    sys.exit(0)
  rest = flag_values(argv, known_only=True)
  if len(rest) > 1:
    flags.FLAGS(rest)
  quiet.configure(cli.verbose())
  try:
    return run()
  finally:
    flag_values.unparse_flags()


def entry_point(program: str, main: Callable[[list[str]], dict]) -> None:
  try:
    main(sys.argv)
  except (ValueError, FileNotFoundError) as e:
    sys.exit(f"python -m {program}: {e}")


def count_params(params) -> int:
  return int(sum(x.size for x in jax.tree.leaves(params)))


def emit(report: dict, path: Optional[str]) -> dict:
  """Prints `report` as JSON and, given a `path`, writes it there too (whole or not at all:
  a table's speed cell reads it back)."""
  text = json.dumps(report, indent=2)
  if path:
    paths.write_atomic(path, text)
  print(text)
  return report
