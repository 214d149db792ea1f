"""Reading official task files robustly: bad rows are reported and skipped, not fatal.

Real benchmark files have flaws (QQP's train.tsv has rows with missing columns, SQuAD
answers occasionally disagree with their context). Every reader takes a `SkipLog`:
a bad row is logged with its file and line and counted, and the run goes on; the
summary says how many rows were dropped and why.
"""
import collections
import csv
import dataclasses
import json
import os
from typing import Iterator

from absl import logging


@dataclasses.dataclass
class Skipped:
  path: str
  line: int
  reason: str

  def __str__(self) -> str:
    return f"{self.path}:{self.line}: {self.reason}"


@dataclasses.dataclass
class SkipLog:
  """Collects the rows a reader dropped. Each is also logged as a warning when seen."""
  entries: list[Skipped] = dataclasses.field(default_factory=list)
  max_logged: int = 20  # a badly broken file should not flood the log

  def skip(self, path: str, line: int, reason: str) -> None:
    entry = Skipped(os.fspath(path), line, reason)
    self.entries.append(entry)
    if len(self.entries) <= self.max_logged:
      logging.warning("Skipped %s", entry)

  def __len__(self) -> int:
    return len(self.entries)

  def counts(self) -> dict[str, int]:
    """Skipped rows per file."""
    return dict(collections.Counter(e.path for e in self.entries))

  def for_file(self, path: str) -> list[Skipped]:
    return [e for e in self.entries if e.path == os.fspath(path)]

  def summary(self) -> str:
    if not self.entries:
      return "no rows skipped"
    per_file = ", ".join(f"{os.path.basename(p)}: {n}" for p, n in self.counts().items())
    return f"{len(self.entries)} rows skipped ({per_file}); first: {self.entries[0]}"


def require_rows(path: str, kept: int, skip_log: SkipLog, what: str = "data rows") -> None:
  """A file none of whose rows survived is an error, not an empty task: says how many
  rows were rejected, why, and the first bad line."""
  if kept:
    return
  rejected = skip_log.for_file(path)
  if not rejected:
    raise ValueError(f"{path} has no {what}; check that it is the task's file, not empty.")
  # Reasons quote each row's own value; the text before the first quote is the kind.
  kinds = collections.Counter(e.reason.split("'")[0].split('"')[0].strip() for e in rejected)
  why = "; ".join(f"{n} x {kind}" for kind, n in kinds.most_common(3))
  raise ValueError(f"{path}: all {len(rejected)} {what} were rejected ({why}); first: line "
                   f"{rejected[0].line}: {rejected[0].reason}. Check the file's format (columns, "
                   "separator, label set) against the task's official files.")


def read_tsv(path: str, skip_log: SkipLog, num_columns: int | None = None,
             has_header: bool = True) -> Iterator[tuple[int, list[str]]]:
  """Yields (1-based line number, fields) for each data row of a tab-separated file.

  No quoting: GLUE files contain bare `"` characters (MRPC, SST-2), which a csv reader
  would treat as quotes and silently merge lines. A UTF-8 BOM (MRPC) is dropped.
  Rows whose field count differs from `num_columns` (or, by default, from the
  header's) are skipped through `skip_log`.
  """
  if not os.path.exists(path):
    raise FileNotFoundError(f"No task file at {path!r}; check --data_dir / $BERTJAX_DATA_DIR.")
  with open(path, encoding="utf-8-sig", newline="", errors="surrogateescape") as f:
    for line_no, line in enumerate(f, start=1):
      line = line.rstrip("\r\n")
      if not _is_utf8(line):
        skip_log.skip(path, line_no, "not valid UTF-8 text")
        continue
      fields = line.split("\t")
      if line_no == 1 and has_header:
        num_columns = num_columns or len(fields)
        continue
      if not line.strip():
        continue
      if num_columns is not None and len(fields) != num_columns:
        skip_log.skip(path, line_no, f"expected {num_columns} tab-separated fields, "
                      f"found {len(fields)}")
        continue
      yield line_no, fields


RECORD_FILES = (".csv", ".tsv", ".jsonl")


def read_records(path: str, skip_log: SkipLog) -> Iterator[tuple[int, dict]]:
  """Yields (line number, {column: value}) for each row of your own file: a .tsv (as
  `read_tsv` reads it) or .csv whose first line names the columns, or a .jsonl of objects
  (a bare string is {'text': ...}). Rows that are none of these go to `skip_log`."""
  extension = os.path.splitext(path)[1].lower()
  if extension not in RECORD_FILES:
    raise ValueError(f"{path}: give a .csv, .tsv or .jsonl file (a header naming the columns, "
                     "or one JSON object per line).")
  if extension == ".tsv":
    with open(path, encoding="utf-8-sig") as f:
      header = f.readline().rstrip("\r\n").split("\t")
    for line, fields in read_tsv(path, skip_log):
      yield line, dict(zip(header, fields))
    return
  if not os.path.exists(path):
    raise FileNotFoundError(f"No file at {path!r}.")
  with open(path, encoding="utf-8-sig", newline="") as f:
    if extension == ".csv":
      for line, row in enumerate(csv.DictReader(f), start=2):
        if None in row or None in row.values():
          skip_log.skip(path, line, "a field count other than the header's")
        else:
          yield line, row
      return
    for line, text in enumerate(f, start=1):
      if not text.strip():
        continue
      try:
        value = json.loads(text)
      except json.JSONDecodeError as e:
        skip_log.skip(path, line, f"not JSON ({e.msg})")
        continue
      if isinstance(value, str):
        value = {"text": value}
      if isinstance(value, dict):
        yield line, value
      else:
        skip_log.skip(path, line, f"a JSON {type(value).__name__}, not an object or a string")


def _is_utf8(line: str) -> bool:
  """False for a line read with errors='surrogateescape' that held undecodable bytes."""
  try:
    line.encode("utf-8")
  except UnicodeEncodeError:
    return False
  return True
