"""Checksums of a checkpoint step folder: sealed once Orbax has committed it, verified
before anything is restored from it.

Orbax makes a step appear atomically (it writes a temporary folder and renames it),
but nothing notices bytes that change later: a flipped block, a truncated or deleted
file, an edited metadata file. `seal(step_dir)` records the size and sha256 of every
file of the committed step, grouped by item (`state/`, `extra/`, `carry/`; files at the
top under ""), in `checksums.json`, written to a temporary name and renamed. `damage`
re-reads the files and names the first one that differs. A step without checksums
(killed between Orbax's commit and the seal, or sealed by nobody) is not intact either,
so no crash can leave a step that looks intact but is not; the run that owns it adopts it
when it resumes, if Orbax's metadata shows the commit finished and no file changed since
(`committed_unchanged`).
"""
import hashlib
import json
import os
from typing import Iterable

CHECKSUMS_FILE = "checksums.json"
FORMAT = 1
_CHUNK = 1 << 20


class CheckpointError(ValueError):
  """A training run's checkpoints cannot be used as they are; the message says why and
  what to do (`python -m bertjax.main` prints it and exits)."""


def _files(step_dir: str) -> dict[str, dict[str, str]]:
  """{item: {path relative to the item: absolute path}} of every file under `step_dir`."""
  items: dict[str, dict[str, str]] = {}
  for root, dirs, files in os.walk(step_dir):
    dirs.sort()
    rel_root = os.path.relpath(root, step_dir)
    for name in sorted(files):
      rel = name if rel_root == "." else os.path.join(rel_root, name)
      if rel == CHECKSUMS_FILE or rel.startswith(CHECKSUMS_FILE + "."):
        continue
      item, _, inner = rel.partition(os.sep)
      if not inner:
        item, inner = "", rel
      items.setdefault(item, {})[inner] = os.path.join(root, name)
  return items


def _sha256(path: str) -> str:
  with open(path, "rb") as f:
    return hashlib.file_digest(f, "sha256").hexdigest()


def seal(step_dir: str) -> None:
  """Writes `step_dir/checksums.json`: the size and sha256 of every file in it."""
  items = {item: {rel: [os.path.getsize(path), _sha256(path)] for rel, path in files.items()}
           for item, files in _files(step_dir).items()}
  target = os.path.join(step_dir, CHECKSUMS_FILE)
  partial = f"{target}.{os.getpid()}.partial"
  with open(partial, "w") as f:
    json.dump({"format": FORMAT, "algorithm": "sha256", "items": items}, f, indent=1,
              sort_keys=True)
    f.flush()
    os.fsync(f.fileno())
  os.replace(partial, target)


ORBAX_METADATA = "_CHECKPOINT_METADATA"
_COMMIT_SLACK_S = 5.0


def committed_unchanged(step_dir: str) -> bool:
  """Whether Orbax finished committing `step_dir` and nothing in it changed since: its
  metadata records a commit time, which Orbax writes once every item is in place, and no
  file was modified after that time (beyond a few seconds for its commit marker)."""
  try:
    with open(os.path.join(step_dir, ORBAX_METADATA)) as f:
      committed = json.load(f).get("commit_timestamp_nsecs")
  except (OSError, ValueError, AttributeError):
    return False
  if not committed:
    return False
  latest = committed / 1e9 + _COMMIT_SLACK_S
  return all(os.path.getmtime(path) <= latest
             for files in _files(step_dir).values() for path in files.values())


def is_sealed(step_dir: str) -> bool:
  return os.path.isfile(os.path.join(step_dir, CHECKSUMS_FILE))


def damage(step_dir: str, items: Iterable[str] | None = None) -> str | None:
  """None when `step_dir` is intact, else a short account of the first problem, naming
  the file. `items`: check only these items (and the top-level files); default all."""
  manifest_path = os.path.join(step_dir, CHECKSUMS_FILE)
  if not os.path.isdir(step_dir):
    return f"{step_dir} is not a folder"
  if not os.path.isfile(manifest_path):
    return (f"{CHECKSUMS_FILE} is missing (the save was interrupted before it was sealed, "
            "or the file was deleted)")
  try:
    with open(manifest_path) as f:
      manifest = json.load(f)
    recorded = manifest["items"]
    if manifest.get("format") != FORMAT or not isinstance(recorded, dict):
      raise ValueError("unknown format")
  except (ValueError, KeyError, TypeError, UnicodeDecodeError) as e:
    return f"{CHECKSUMS_FILE} is unreadable ({type(e).__name__})"
  wanted = recorded if items is None else [""] + [i for i in items if i in recorded]
  for item in wanted:
    folder = os.path.join(step_dir, item)
    if item and not os.path.isdir(folder):
      return f"{item}/ is missing"
    for rel, (size, digest) in sorted(recorded.get(item, {}).items()):
      path = os.path.join(folder, rel)
      name = os.path.join(item, rel)
      if not os.path.isfile(path):
        return f"{name} is missing"
      actual = os.path.getsize(path)
      if actual != size:
        return f"{name} has {actual} bytes, {size} when saved (truncated or overwritten)"
      if _sha256(path) != digest:
        return f"{name} differs from its sha256 in {CHECKSUMS_FILE} (corrupted)"
  return None
