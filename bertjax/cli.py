"""What every bertjax command shares, run as `bertjax COMMAND` or `python -m bertjax.X`.

- `--help` prints the command's usage and every flag it takes, each with its description,
  and exits 0 (absl's own lists only the flags of the module it runs, and exits 1);
- start-up is quiet (`bertjax.quiet`) unless `--verbosity` is given;
- one spelling of the flags every command shares (`--gin_file`, `--gin_bindings`,
  `--output_dir`, `--checkpoint`), the older spellings kept as aliases (`alias`).

  cli.run(main, __doc__)                           # a command on absl's global flags
  cli.run(main, __doc__, flag_values=FLAGS)        # on a private flag set
"""
import sys
from typing import Callable

from absl import app, flags

from bertjax import quiet

HELP_FLAGS = ("-h", "--help", "--helpshort")
VERBOSITY_HELP = ("--verbosity=0 (-v 0; 1 adds DEBUG): also show what is quiet by default, the "
                  "libraries' start-up lines (TensorFlow, JAX, Orbax, seqio) and INFO logs.")


def wants_help(argv: list[str]) -> bool:
  return any(arg in HELP_FLAGS for arg in argv[1:])


def help_text(doc: str, flag_values: flags.FlagValues | None = None) -> str:
  """The command's docstring, then every flag a bertjax module (or `__main__`) defined in
  `flag_values`, grouped by module, with its description, default and aliases."""
  flag_values = flags.FLAGS if flag_values is None else flag_values
  modules = sorted(m for m in flag_values.flags_by_module_dict()
                   if m == "__main__" or m.split(".")[0] == "bertjax")
  parts = [doc.strip(), "", "flags:"]
  parts += [flag_values.module_help(m) for m in modules]
  parts += ["", "logging:", f"  {VERBOSITY_HELP}", "  --helpfull: also absl's own flags."]
  return "\n".join(parts)


def alias(name: str, original: str, flag_values: flags.FlagValues | None = None) -> None:
  """`--name` means `--original` (an older or shared spelling); `--help` lists it beside
  the caller's flags."""
  flags.DEFINE_alias(name, original,
                     flag_values=flags.FLAGS if flag_values is None else flag_values,
                     module_name=sys._getframe(1).f_globals["__name__"])  # pylint: disable=protected-access


def verbose() -> bool:
  """Whether the command line asked for library logs (`--verbosity` / `-v`)."""
  return flags.FLAGS["verbosity"].present > 0


def run(main: Callable[[list[str]], object], doc: str,
        flag_values: flags.FlagValues | None = None) -> None:
  """Runs `main(argv)` as absl's `app.run` would, with the shared `--help` and quiet
  start-up. A private `flag_values` is parsed first; what it does not know goes to absl's
  global flags (`--verbosity` and the other logging flags)."""
  if wants_help(sys.argv):
    print(help_text(doc, flag_values))
    sys.exit(0)

  def parse(argv: list[str]) -> list[str]:
    if flag_values is not None:
      argv = flag_values(argv, known_only=True)
    return flags.FLAGS(argv)

  def quiet_main(argv: list[str]):
    quiet.configure(verbose())
    return main(argv)

  app.run(quiet_main, flags_parser=parse)
