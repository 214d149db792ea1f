"""What `python -m bertjax.distill.student`, `.speed` and `.pair_speed` share: parsing
their private flag sets (help on request, flags reset afterwards so tests can call `main`
again), turning bad input into a one-line exit message and printing the JSON report."""
import json
import sys
from typing import Callable, Optional

import jax
from absl import flags

from bertjax import paths


def run_with_flags(flag_values: flags.FlagValues, run: Callable[[], dict], doc: str,
                   argv: list[str]) -> dict:
  """Parses `argv` (argv[0] is the program name) into `flag_values`, then `run()`."""
  if any(arg in ("-h", "--help", "--helpshort") for arg in argv[1:]):
    print(doc + "\n" + flag_values.get_help())
    sys.exit(0)
  flag_values(argv)
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
