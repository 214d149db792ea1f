"""Where a command writes, claimed before it writes anything.

Every command that writes a folder or a file (`convert`, `finetune.run`, `encode`,
`sbert.train`, `distill`, `analysis`, the tools) claims it first, after its flags are read and
before any output, so that nothing that exists is overwritten by accident:

  * an existing, non-empty folder (or an existing file) is refused, naming it and what it
    holds, unless the command is given `--overwrite`, which removes it first, or the
    folder is the command's own to continue (`own`: a fine-tuning stopped by SIGTERM,
    rerun to resume, `finetune.resume`), which is kept as it is;
  * an output that is, holds or lies inside something the command reads (the checkpoint a
    fine-tuning starts from, the model a conversion reads) is refused even with --overwrite;
  * a path that is the wrong kind (a file where a folder goes), or whose folder does not
    exist or cannot be written, is refused with the fix.

A training run's model_dir is never claimed here: only `python -m bertjax.main` itself writes
into it (guarded by its run lock, `train.run_lock`), so it is refused unless overwritten.
"""
import os
import shutil
from typing import Callable, Iterable, Optional


# The tables runner's own files in a cell's folder (its log, its attempts), written there
# before the cell's command starts: they do not make the folder another command's output.
RUNNER_FILES = ("cell.log", "attempts.jsonl")


class OutputError(ValueError):
  """An output that cannot be claimed: the message names it and the fix."""


def _resolved(path: str) -> str:
  return os.path.realpath(os.path.abspath(os.fspath(path)))


def _overlaps(a: str, b: str) -> bool:
  """Whether one of two paths is, or lies inside, the other."""
  a, b = _resolved(a), _resolved(b)
  return a == b or a.startswith(b.rstrip(os.sep) + os.sep) or b.startswith(a.rstrip(os.sep) + os.sep)


def _check_reads(path: str, flag: str, reads: Iterable[Optional[str]]) -> None:
  for source in reads:
    if source and os.path.exists(source) and _overlaps(path, source):
      raise OutputError(f"{flag}={path} overlaps {source}, which this command reads; write "
                        "the output somewhere else (--overwrite never replaces an input).")


def _check_parent(path: str, flag: str) -> None:
  parent = os.path.dirname(_resolved(path))
  existing = parent
  while not os.path.exists(existing):
    existing = os.path.dirname(existing)
  if not os.path.isdir(existing):
    raise OutputError(f"{flag}={path}: {existing} is a file, not a folder; choose another path.")
  if not os.access(existing, os.W_OK | os.X_OK):
    raise OutputError(f"{flag}={path}: {existing} is not writable; choose a folder you can "
                      "write to.")


def _describe(folder: str) -> str:
  names = sorted(os.listdir(folder))
  shown = ", ".join(names[:4]) + (f" and {len(names) - 4} more" if len(names) > 4 else "")
  if os.path.isdir(os.path.join(folder, "checkpoints")) and (
      os.path.isfile(os.path.join(folder, "config.gin"))
      or os.path.isfile(os.path.join(folder, "model_config.json"))):
    return f"a training run's model_dir ({shown})"
  return f"not empty: {shown}"


def claim_folder(path: str, flag: str, overwrite: bool = False,
                 reads: Iterable[Optional[str]] = (),
                 own: Optional[Callable[[str], bool]] = None) -> str:
  """Makes `path` (a folder) this command's output; returns its absolute path. See the
  module docstring for what is refused. With `overwrite`, an existing folder is removed;
  without, one that `own(path)` says is this command's to continue is kept (`own` may
  raise OutputError to refuse it with its own reason)."""
  path = os.path.abspath(os.fspath(path))
  _check_reads(path, flag, reads)
  if os.path.exists(path) and not os.path.isdir(path):
    raise OutputError(f"{flag}={path} is a file; give a folder path.")
  if os.path.isdir(path) and set(os.listdir(path)) - set(RUNNER_FILES):
    if not overwrite and own is not None and own(path):
      return path
    if not overwrite:
      raise OutputError(f"{flag}={path} exists and is {_describe(path)}. Give a new {flag}, "
                        "or pass --overwrite to replace it.")
    shutil.rmtree(path)
  _check_parent(path, flag)
  return path


def claim_file(path: str, flag: str, overwrite: bool = False,
               reads: Iterable[Optional[str]] = ()) -> str:
  """Makes `path` (a file) this command's output; returns its absolute path. The folder it
  goes in must exist: a missing one is refused now, not after the work is done."""
  path = os.path.abspath(os.fspath(path))
  _check_reads(path, flag, reads)
  if os.path.isdir(path):
    raise OutputError(f"{flag}={path} is a folder; give a file path.")
  if not os.path.isdir(os.path.dirname(path)):
    raise OutputError(f"{flag}={path}: the folder {os.path.dirname(path)} does not exist; "
                      "create it first.")
  if os.path.exists(path) and not overwrite:
    raise OutputError(f"{flag}={path} exists. Give a new {flag}, or pass --overwrite to "
                      "replace it.")
  _check_parent(path, flag)
  return path
