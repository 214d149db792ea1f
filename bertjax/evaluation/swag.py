"""SWAG: choose the most plausible of four continuations (BERT paper, Sec. 4.4).

Files are the official `regular/` CSVs:
`,video-id,fold-ind,startphrase,sent1,sent2,gold-source,ending0,...,ending3,label`;
the leaderboard's metric is accuracy. (Features for a model: bertjax.finetune.swag.)
"""
import csv
import dataclasses
import os

import numpy as np

from bertjax import paths
from bertjax.evaluation import metrics, readers

NUM_CHOICES = 4
_REQUIRED = ("sent1", "sent2", "ending0", "ending1", "ending2", "ending3", "label")


@dataclasses.dataclass(frozen=True)
class SwagExample:
  context: str
  start: str                # sent2: the beginning of the continuation
  endings: tuple[str, ...]
  label: int
  source: str


def path(split: str, data_dir: str | None = None) -> str:
  return os.path.join(data_dir or paths.data_dir(), "swag", f"{split}.csv")


def read_examples(file: str, skip_log: readers.SkipLog) -> list[SwagExample]:
  """Rows of an official SWAG CSV; rows with missing fields or a label outside 0-3 are
  reported (file, line) and skipped."""
  if not os.path.exists(file):
    raise FileNotFoundError(f"No SWAG file at {file!r} (SWAG is not in the shared data; "
                            f"pass --data_dir with a swag/ folder of the official CSVs).")
  examples = []
  with open(file, encoding="utf-8", newline="") as f:
    reader = csv.DictReader(f)
    missing = [c for c in _REQUIRED if c not in (reader.fieldnames or [])]
    if missing:
      raise ValueError(f"{file}: header lacks SWAG columns {missing}.")
    for row in reader:
      line = reader.line_num
      if any(row.get(c) is None for c in _REQUIRED):
        skip_log.skip(file, line, "row has fewer fields than the header")
        continue
      if row["label"].strip() not in {str(i) for i in range(NUM_CHOICES)}:
        skip_log.skip(file, line, f"label {row['label']!r} not in 0..{NUM_CHOICES - 1}")
        continue
      examples.append(SwagExample(row["sent1"], row["sent2"],
                                  tuple(row[f"ending{i}"] for i in range(NUM_CHOICES)),
                                  int(row["label"]), f"{file}:{line}"))
  readers.require_rows(file, len(examples), skip_log)
  return examples


def accuracy(logits: np.ndarray, labels: np.ndarray) -> float:
  """The fraction of examples whose highest-scoring ending is the gold one."""
  return metrics.accuracy(np.asarray(logits).argmax(-1), labels)
