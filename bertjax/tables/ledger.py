"""The ledger: a committed copy of every finished cell's record, so a table can be built over
several sittings on machines that start empty.

A cell's own folder (`grid.MARKER` in `experiments/<paper>/out/...`) is git-ignored and holds
checkpoints too large to keep, so it is gone on a fresh machine. The ledger beside the results
file (`<results>.cells.json`, small, committed with them) keeps each finished cell's record.
Before a run, `restore` writes those records back as done-markers, except for a cell whose
output a cell still to run needs (a pretraining whose fine-tunings are not all finished, the
corpus of such a pretraining): that one runs again. Every cell is deterministic given its
seed, so it rebuilds the same corpus and the same model.
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
  """Adds the record of every done cell in `cells` to the ledger at `path` (atomically)."""
  entries = load(path)
  entries.update({c.key: c.record() for c in cells if c.done()})
  grid.atomic_json(path, dict(sorted(entries.items())))


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
