"""Quiet start-up for bertjax's commands: the run's own lines, not its libraries'.

A command prints its banner, progress bars and results. What the stack prints on every
start says nothing about the run: TensorFlow's native start-up lines (oneDNN and CUDA
probes, `failed call to cuInit` on a CPU machine, printed twice), Orbax's INFO lines,
seqio's advice against uncached datasets, faiss's probe for an AVX512 build. Commands
(`bertjax ...`, `python -m bertjax...`) drop them; `--verbosity` (absl's flag, e.g.
`--verbosity=0` for INFO) brings everything back. Warnings that mean something (a
damaged checkpoint, dropped data, a non-finite step) are not in `NOISE` and stay. A
library import (`import bertjax` in a notebook or a test) changes nothing.
"""
import contextlib
import importlib.abc
import importlib.machinery
import logging
import os
import re
import sys

# Set before TensorFlow loads: its native logs from WARNING up (cuInit, CPU features).
NATIVE_ENV = {"TF_CPP_MIN_LOG_LEVEL": "3"}
# Modules whose import prints native lines before any log level applies (absl's
# "before InitializeLog" lines): imported with the process's stderr sent to /dev/null.
NOISY_IMPORTS = ("tensorflow",)
# Library warnings that say nothing about the run (matched against the message).
NOISE = (
    r"^Using an uncached FunctionDataset",                  # seqio, for every in-memory task
    r"^Type handler registry type .* overriding",            # Orbax, once per process
    r"^Metadata file does not exist: .*_CHECKPOINT_METADATA",  # Orbax, opening a run folder
    r"^Could not load library with AVX512 support",         # faiss's probe
)
_NOISE = re.compile("|".join(NOISE))


def is_command(argv: list[str]) -> bool:
  """Whether this process is a bertjax command (`python -m bertjax...` while the package
  loads, argv[0] is '-m'; the `bertjax` console script), not a library import."""
  return bool(argv) and (argv[0] == "-m" or os.path.basename(argv[0]) == "bertjax")


def asked_verbose(argv: list[str]) -> bool:
  return any(a == "-v" or a.startswith(("--verbosity", "-v=")) for a in argv[1:])


def native_start(argv: list[str] | None = None) -> None:
  """For a command without `--verbosity`: quiet TensorFlow's native start-up. Runs when
  the bertjax package loads (before anything imports TensorFlow)."""
  argv = sys.argv if argv is None else argv
  if not is_command(argv) or asked_verbose(argv):
    return
  for name, value in NATIVE_ENV.items():
    os.environ.setdefault(name, value)
  if not any(isinstance(f, _QuietImport) for f in sys.meta_path):
    sys.meta_path.insert(0, _QuietImport())
  _drop_noise(logging.lastResort)  # what libraries log while they load, before absl's handler


@contextlib.contextmanager
def native_stderr_silenced():
  """File descriptor 2 goes to /dev/null (native code writes there, past sys.stderr)."""
  sys.stderr.flush()
  saved = os.dup(2)
  devnull = os.open(os.devnull, os.O_WRONLY)
  try:
    os.dup2(devnull, 2)
    yield
  finally:
    os.dup2(saved, 2)
    os.close(saved)
    os.close(devnull)


class _QuietImport(importlib.abc.MetaPathFinder):
  """Imports each of NOISY_IMPORTS (the package itself, once) with stderr silenced."""

  def find_spec(self, name, path=None, target=None):
    if name not in NOISY_IMPORTS:
      return None
    spec = importlib.machinery.PathFinder.find_spec(name, path)
    if spec is None or spec.loader is None:
      return spec
    load = spec.loader.exec_module

    def exec_module(module):
      with native_stderr_silenced():
        load(module)

    spec.loader.exec_module = exec_module
    return spec


class _DropNoise(logging.Filter):

  def filter(self, record: logging.LogRecord) -> bool:
    return not _NOISE.search(record.getMessage())


def configure(verbose: bool) -> None:
  """After flags are parsed: WARNING and up, less NOISE, unless `verbose`."""
  from absl import logging as absl_logging  # pylint: disable=g-import-not-at-top
  if verbose:
    return
  absl_logging.set_verbosity(absl_logging.WARNING)
  _drop_noise(absl_logging.get_absl_handler())


def _drop_noise(handler: logging.Handler | None) -> None:
  if handler is not None and not any(isinstance(f, _DropNoise) for f in handler.filters):
    handler.addFilter(_DropNoise())
