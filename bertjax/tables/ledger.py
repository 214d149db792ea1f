"""The ledger: a committed copy of every finished cell's record, so a table can be built over
several sittings on machines that start empty.

A cell's own folder (`grid.MARKER` in `experiments/<paper>/out/...`) is git-ignored and holds
checkpoints too large to keep, so it is gone on a fresh machine. The ledger beside the results
file (`<results>.cells.json`, small, committed with them) keeps each finished cell's record.
Before a run, `restore` writes those records back as done-markers, except for a cell whose
output a cell still to run needs (a pretraining whose fine-tunings are not all finished, the
corpus of such a pretraining): that one runs again. Every cell is deterministic given its
seed, so it rebuilds the same corpus (its WordPiece vocabulary too, since
`vocab_training.train_wordpiece` numbers its pieces itself) and the same model. A corpus
that still comes out differently (another library version) is reported by `record`.
"""
import json
import os
from typing import Iterable

from bertjax.tables import grid


def path_for(results_file: str) -> str:
  return os.path.splitext(results_file)[0] + ".cells.json"


def load(path: str) -> dict[str, dict]:
  if not os.path.isfile(path):
    return {}
  with open(path) as f:
    return json.load(f)


def record(path: str, cells: Iterable[grid.Cell]) -> None:
  """Adds the record of every done cell in `cells` to the ledger at `path` (atomically).

  A corpus rebuilt in a later sitting that differs from the one the ledger holds (another
  vocabulary: the cells finished before were trained on the earlier one) is not silently
  taken for it: the difference is printed, and the earlier build is kept in the new
  record's `earlier_builds` (and its cell's marker), which the results file reports.
  """
  entries = load(path)
  for cell in cells:
    if not cell.done():
      continue
    new, old = cell.record(), entries.get(cell.key)
    if old is not None and "parts" in new:
      earlier = old.get("earlier_builds", [])
      if not _same_build(old, new):
        earlier = earlier + [_build(old)]
        print(f"WARNING: {cell.key} was rebuilt differently from the ledger's record "
              f"({_build(old)} before, {_build(new)} now): cells finished in earlier "
              "sittings were trained on the earlier build.", flush=True)
      if earlier and new.get("earlier_builds") != earlier:
        new["earlier_builds"] = earlier
        grid.atomic_json(cell.marker, new)
    entries[cell.key] = new
  grid.atomic_json(path, dict(sorted(entries.items())))


def _build(rec: dict) -> dict:
  """What identifies a corpus build: its vocabulary's digest (where recorded) and the
  tokens it gives each part of the training text."""
  return {**({"vocab_sha256": rec["vocab_sha256"]} if "vocab_sha256" in rec else {}),
          "part_tokens": {p: v["tokens"] for p, v in rec["parts"]["train"].items()}}


def _same_build(a: dict, b: dict) -> bool:
  if "vocab_sha256" in a and "vocab_sha256" in b:
    return a["vocab_sha256"] == b["vocab_sha256"]
  return _build(a)["part_tokens"] == _build(b)["part_tokens"]


def restore(path: str, cells: list[grid.Cell]) -> list[str]:
  """Marks done every cell the ledger holds whose output no unfinished cell needs; returns
  their keys. `cells` is in running order, so each cell's dependents come after it."""
  entries = load(path)
  restorable: set[str] = set()
  for cell in reversed(cells):
    dependents = [c for c in cells if cell.key in c.needs]
    if cell.key in entries and all(c.key in restorable or c.done() for c in dependents):
      restorable.add(cell.key)
  restored = []
  for cell in cells:
    if cell.key in restorable and not cell.done():
      os.makedirs(cell.directory, exist_ok=True)
      grid.atomic_json(cell.marker, entries[cell.key])
      restored.append(cell.key)
  return restored
