"""The ledger: a committed copy of every finished cell's record, so a table can be built over
several sittings on machines that start empty.

A cell's own folder (`grid.MARKER` in `experiments/<paper>/out/...`) is git-ignored and holds
checkpoints too large to keep, so it is gone on a fresh machine. The ledger beside the results
file (`<results>.cells.json`, small, committed with them) keeps each finished cell's record.
Before a run, `restore` writes those records back as done-markers, except for a cell whose
output a cell still to run needs (a pretraining whose fine-tunings are not all finished, the
corpus of such a pretraining): that one runs again. Every cell is deterministic given its
seed, so it rebuilds the same corpus (its WordPiece vocabulary too, since
`vocab_training.train_wordpiece` numbers its pieces itself) and the same model. A cell that
still comes out differently (another library version, another machine's arithmetic) is
reported by `record`: a corpus by its vocabulary, any other cell by its held-out results.
"""
import json
import math
import os
from typing import Iterable, Optional

from bertjax.tables import grid


def path_for(results_file: str) -> str:
  return os.path.splitext(results_file)[0] + ".cells.json"


def load(path: str) -> dict[str, dict]:
  if not os.path.isfile(path):
    return {}
  try:
    with open(path) as f:
      entries = json.load(f)
  except ValueError as e:  # (json.JSONDecodeError, UnicodeDecodeError)
    raise ValueError(f"The ledger {path} is not valid JSON ({e}): restore it from git "
                     f"(git checkout -- {path}) or move it away to start the table over.") from None
  if not isinstance(entries, dict):
    raise ValueError(f"The ledger {path} holds a {type(entries).__name__}, not the cells' "
                     f"records by key: restore it from git or move it away.")
  return entries


def record(path: str, cells: Iterable[grid.Cell],
           table_cells: Optional[list[grid.Cell]] = None) -> None:
  """Adds the record of every done cell in `cells` to the ledger at `path` (atomically).

  A cell run again in a later sitting (a corpus, or a pretraining or teacher whose output
  unfinished cells needed) that differs from the record the ledger holds (another
  vocabulary; held-out results apart by more than float noise) is not silently taken for
  it: the cells finished before were made from the earlier one. The difference is printed,
  and the earlier build is kept in the new record's `earlier_builds` (and its cell's
  marker), which the results file reports. Given the table's cells (`table_cells`, in
  running order), a difference no recorded cell was made from is not one: nothing mixes.
  """
  entries = load(path)
  for cell in cells:
    if not cell.done():
      continue
    new, old = cell.record(), entries.get(cell.key)
    before, after = _build(old or {}), _build(new)
    if before is not None and after is not None:
      earlier = old.get("earlier_builds", [])
      made_from_earlier = table_cells is None or any(
          key in entries for key in _made_from(cell.key, table_cells))
      if made_from_earlier and not _same_build(before, after):
        earlier = earlier + [before]
        print(f"WARNING: {cell.key} was rebuilt differently from the ledger's record "
              f"({before} before, {after} now): cells finished in earlier sittings were "
              "made from the earlier build.", flush=True)
      if earlier and new.get("earlier_builds") != earlier:
        new["earlier_builds"] = earlier
        grid.atomic_json(cell.marker, new)
    entries[cell.key] = new
  grid.atomic_json(path, dict(sorted(entries.items())))


def _made_from(key: str, cells: list[grid.Cell]) -> set[str]:
  """The keys of the cells made from cell `key`'s output, directly or through others
  (`cells` in running order: a cell comes after those it needs)."""
  found: set[str] = set()
  for cell in cells:
    if key in cell.needs or found.intersection(cell.needs):
      found.add(cell.key)
  return found


# Two runs of one command agree to this (relative) tolerance or are different builds: the
# same seed on another machine or library version may move a loss in its last digits.
RESULTS_RTOL = 1e-3


def _build(rec: dict) -> Optional[dict]:
  """What identifies a cell's output, or None (nothing to compare): a corpus by its
  vocabulary's digest (where recorded) and the tokens it gives each part of the training
  text; another cell by its held-out results (`eval`, timings left out)."""
  if "parts" in rec:
    return {**({"vocab_sha256": rec["vocab_sha256"]} if "vocab_sha256" in rec else {}),
            "part_tokens": {p: v["tokens"] for p, v in rec["parts"]["train"].items()}}
  results = held_out_results(rec.get("eval"))
  return {"eval": results} if results else None


def held_out_results(value, prefix: str = "") -> dict[str, float]:
  """The numbers under a record's `eval`, by their '/'-joined keys, without timings."""
  if isinstance(value, dict):
    return {k: v for key, sub in value.items() if "time" not in key
            for k, v in held_out_results(sub, f"{prefix}{key}/").items()}
  if isinstance(value, (int, float)) and not isinstance(value, bool):
    return {prefix.rstrip("/"): value}
  return {}


def _same_build(before: dict, after: dict) -> bool:
  if "eval" in before:  # the metrics both report (a later version may report more)
    shared = before["eval"].keys() & after.get("eval", {}).keys()
    return bool(shared) and all(
        math.isclose(before["eval"][k], after["eval"][k], rel_tol=RESULTS_RTOL, abs_tol=1e-9)
        for k in shared)
  if "vocab_sha256" in before and "vocab_sha256" in after:
    return before["vocab_sha256"] == after["vocab_sha256"]
  return before["part_tokens"] == after["part_tokens"]


# Beside a done-marker that `restore` wrote from the ledger (the cell's output is not here).
RESTORED = "restored_from_ledger"


def restore(path: str, cells: list[grid.Cell]) -> list[str]:
  """Marks done every cell the ledger holds whose output no unfinished cell needs; returns
  their keys. `cells` is in running order, so each cell's dependents come after it.

  A marker restored earlier (by this ledger, or by another table's in a folder they share,
  Table.folder) whose output an unfinished cell now needs (a pretraining's checkpoints) is
  taken back, and with it those of the cells it needs: they run again."""
  dependents = {cell.key: [c for c in cells if cell.key in c.needs] for cell in cells}
  for cell in reversed(cells):
    flag = os.path.join(cell.directory, RESTORED)
    if cell.done() and os.path.isfile(flag) and any(not c.done()
                                                    for c in dependents[cell.key]):
      os.remove(cell.marker)
      os.remove(flag)
  entries = load(path)
  restorable: set[str] = set()
  for cell in reversed(cells):
    if cell.key in entries and all(c.key in restorable or c.done()
                                   for c in dependents[cell.key]):
      restorable.add(cell.key)
  restored = []
  for cell in cells:
    if cell.key in restorable and not cell.done():
      os.makedirs(cell.directory, exist_ok=True)
      open(os.path.join(cell.directory, RESTORED), "w").close()  # before the marker it flags
      grid.atomic_json(cell.marker, entries[cell.key])
      restored.append(cell.key)
  return restored
