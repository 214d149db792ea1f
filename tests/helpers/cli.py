"""Runs a `python -m MODULE ...` command in this process, as the shell would, so a test pays
no interpreter start, JAX / TensorFlow import or recompilation per command.

absl keeps one global flag set and bertjax's CLIs define overlapping names (--checkpoint,
--out): each command runs against that set without any flag a bertjax module defined, and
the bertjax modules that define flags when imported are imported afresh for it. The flag
set and the modules are put back afterwards.
"""
import contextlib
import io
import runpy
import sys
import warnings

from absl import flags
import gin

# What a FlagValues holds (absl keeps it in its __dict__, see FlagValues.__init__).
_STATE = ("__flags", "__hiddenflags", "__flags_by_module", "__flags_by_module_id",
          "__key_flags_by_module", "__flags_parsed", "__unparse_flags_called")


def _ours(module_name: str) -> bool:
  return module_name == "__main__" or module_name.split(".")[0] == "bertjax"


def _without_our_flags(state: dict) -> dict:
  ours = {id(f) for m, fs in state["__flags_by_module"].items() if _ours(m) for f in fs}
  keep = lambda fs: [f for f in fs if id(f) not in ours]
  return {
      "__flags": {n: f for n, f in state["__flags"].items() if id(f) not in ours},
      "__hiddenflags": set(state["__hiddenflags"]),
      "__flags_by_module": {m: keep(fs) for m, fs in state["__flags_by_module"].items()
                            if not _ours(m)},
      "__flags_by_module_id": {i: keep(fs) for i, fs in state["__flags_by_module_id"].items()},
      "__key_flags_by_module": {m: keep(fs) for m, fs in state["__key_flags_by_module"].items()
                                if not _ours(m)},
      "__flags_parsed": False, "__unparse_flags_called": False}


def _put_module(name: str, module) -> None:
  """sys.modules[name] = module (None: removed), and the parent package's attribute too."""
  parent, _, child = name.rpartition(".")
  if module is None:
    sys.modules.pop(name, None)
    if parent in sys.modules and hasattr(sys.modules[parent], child):
      delattr(sys.modules[parent], child)
  else:
    sys.modules[name] = module
    if parent in sys.modules:
      setattr(sys.modules[parent], child, module)


@contextlib.contextmanager
def _own_flags(argv: list[str]):
  state = flags.FLAGS.__dict__
  saved = {key: state[key] for key in _STATE}
  definers = [m for m in saved["__flags_by_module"] if _ours(m) and m in sys.modules
              and m != "__main__"]
  modules = {name: sys.modules[name] for name in definers}
  for name in definers:
    _put_module(name, None)
  state.update(_without_our_flags(saved))
  saved_argv, sys.argv = sys.argv, list(argv)
  gin.clear_config()
  try:
    yield
  finally:
    gin.clear_config()
    sys.argv = saved_argv
    imported = [m for m in state["__flags_by_module"] if _ours(m) and m != "__main__"]
    for name in imported:
      _put_module(name, None)
    for name, module in modules.items():
      _put_module(name, module)
    state.update(saved)


def _finetune_run() -> None:
  # Its `__main__` block would register FinetuneRun with gin a second time (as __main__'s).
  from bertjax.finetune import run
  run.command()


ENTRY_POINTS = {"bertjax.finetune.run": _finetune_run}


def run_module(argv: list[str]) -> str:
  """Runs `python -m MODULE ARGS...` (argv without `python -m`: [MODULE, ARGS...]) in this
  process and returns what it printed; fails with the command on a non-zero exit."""
  module = argv[0]
  out = io.StringIO()
  with _own_flags(argv), contextlib.redirect_stdout(out):
    try:
      if module in ENTRY_POINTS:
        ENTRY_POINTS[module]()
      else:
        with warnings.catch_warnings():
          # runpy warns when the module is also imported (e.g. by a test): it runs as
          # __main__ in a fresh namespace, which leaves that import untouched.
          warnings.filterwarnings("ignore", r".*found in sys\.modules", RuntimeWarning)
          runpy.run_module(module, run_name="__main__", alter_sys=True)
    except SystemExit as done:
      if done.code not in (None, 0):
        raise AssertionError(f"`python -m {' '.join(argv)}` exited with {done.code!r}; it "
                             f"printed:\n{out.getvalue()[-3000:]}") from done
  return out.getvalue()
