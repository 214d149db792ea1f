"""SWAG: choose the most plausible of four continuations (BERT paper, Sec. 4.4).

Each ending becomes one sequence `[CLS] sent1 [SEP] sent2 ending_i [SEP]`; the head
scores each [CLS] with one vector and a softmax over the four scores is trained with
cross-entropy (`heads.MultipleChoice`). Files are the official `regular/` CSVs:
`,video-id,fold-ind,startphrase,sent1,sent2,gold-source,ending0,...,ending3,label`.
"""
import csv
import dataclasses
import os

import numpy as np

from bertjax import paths
from bertjax.finetune import features
from bertjax.evaluation import readers
from bertjax.finetune.tokenization import WordPiece

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
  return examples


def convert_examples(examples: list[SwagExample], tokenizer: WordPiece,
                     max_length: int) -> dict[str, np.ndarray]:
  """Encoder inputs [N, 4, L] (one row per ending) and `labels` [N]."""
  ids, types = [], []
  for example in examples:
    context = tokenizer.encode(example.context)
    for ending in example.endings:
      packed = features.encode_pair(context, tokenizer.encode(f"{example.start} {ending}"),
                                    max_length, tokenizer.cls_id, tokenizer.sep_id)
      ids.append(packed[0])
      types.append(packed[1])
  arrays = features.to_arrays(ids, types, max_length, tokenizer.pad_id)
  arrays = {k: v.reshape(len(examples), NUM_CHOICES, max_length) for k, v in arrays.items()}
  arrays["labels"] = np.asarray([e.label for e in examples], np.int32)
  return arrays


def accuracy(logits: np.ndarray, labels: np.ndarray) -> float:
  return float(np.mean(np.asarray(logits).argmax(-1) == np.asarray(labels)))
