"""GLUE: the nine tasks' files, their readers and the leaderboard's metrics.

Each task is a `GlueTask` row: where its TSVs are, which columns hold the sentence(s)
and label, the label set (None for STS-B's regression score), the metrics the
leaderboard reports and the names the GLUE server expects. Readers turn the official
train / dev / test files into `PairExample`s; `evaluate` scores a classification or
regression head's outputs with the task's metrics. (Tokenizing the examples for a
model is bertjax.finetune.glue's job.)
"""
import dataclasses
import math
import os

import numpy as np

from bertjax import paths
from bertjax.evaluation import metrics, readers


@dataclasses.dataclass(frozen=True)
class GlueTask:
  name: str
  folder: str
  text_columns: tuple[int, ...]  # one (single sentence) or two (pair)
  label_column: int              # may be negative (MNLI's gold_label is the last column)
  labels: tuple[str, ...] | None  # None: regression on a float score
  metrics: tuple[str, ...]
  eval_splits: tuple[str, ...] = ("dev",)
  has_header: bool = True
  num_columns: int | None = None  # None: as many as the header
  # Regression: the head is trained on (score - center) / scale, a [-1, 1] target
  # (STS-B scores are 0..5). With Adam every weight moves ~lr per step, so an
  # uncentred target would spend a short fine-tuning run just learning its mean.
  label_center: float = 0.0
  label_scale: float = 1.0
  # The GLUE server's file name per eval split (its test split: "dev*" -> "test*"),
  # and the test files' text columns when they differ (test files start with an index).
  submission_names: tuple[str, ...] = ()
  test_text_columns: tuple[int, ...] | None = None
  # What a model reports for each label (its config's id2label, transformers' pipelines),
  # where the data's own values are bare digits; None: the labels themselves.
  label_names: tuple[str, ...] | None = None

  @property
  def is_regression(self) -> bool:
    return self.labels is None

  @property
  def score_range(self) -> tuple[float, float]:
    """A regression task's valid scores (STS-B: 0 to 5)."""
    return self.label_center - self.label_scale, self.label_center + self.label_scale

  @property
  def names(self) -> tuple[str, ...] | None:
    """The labels' names, in label order (None for regression)."""
    return self.label_names or self.labels

  @property
  def num_labels(self) -> int:
    return 1 if self.labels is None else len(self.labels)

  def path(self, split: str, data_dir: str | None = None) -> str:
    return os.path.join(data_dir or paths.data_dir(), "glue", self.folder, f"{split}.tsv")

  @property
  def test_splits(self) -> tuple[str, ...]:
    return tuple(s.replace("dev", "test", 1) for s in self.eval_splits)


_NLI = ("entailment", "not_entailment")
TASKS = {t.name: t for t in [
    # CoLA has no header: source, label, original label, sentence.
    GlueTask("cola", "CoLA", (3,), 1, ("0", "1"), ("mcc",), has_header=False, num_columns=4,
             submission_names=("CoLA",), test_text_columns=(1,),
             label_names=("unacceptable", "acceptable")),
    GlueTask("sst2", "SST-2", (0,), 1, ("0", "1"), ("accuracy",), submission_names=("SST-2",),
             test_text_columns=(1,), label_names=("negative", "positive")),
    GlueTask("mrpc", "MRPC", (3, 4), 0, ("0", "1"), ("f1", "accuracy"),
             submission_names=("MRPC",), label_names=("not_equivalent", "equivalent")),
    GlueTask("qqp", "QQP", (3, 4), 5, ("0", "1"), ("f1", "accuracy"), submission_names=("QQP",),
             test_text_columns=(1, 2), label_names=("not_duplicate", "duplicate")),
    GlueTask("stsb", "STS-B", (7, 8), 9, None, ("pearson", "spearman"), label_center=2.5,
             label_scale=2.5, submission_names=("STS-B",)),
    GlueTask("mnli", "MNLI", (8, 9), -1, ("contradiction", "entailment", "neutral"),
             ("accuracy",), eval_splits=("dev_matched", "dev_mismatched"),
             submission_names=("MNLI-m", "MNLI-mm")),
    GlueTask("qnli", "QNLI", (1, 2), 3, _NLI, ("accuracy",), submission_names=("QNLI",)),
    GlueTask("rte", "RTE", (1, 2), 3, _NLI, ("accuracy",), submission_names=("RTE",)),
    GlueTask("wnli", "WNLI", (1, 2), 3, ("0", "1"), ("accuracy",), submission_names=("WNLI",),
             label_names=("not_entailment", "entailment")),
]}


def get_task(name: str) -> GlueTask:
  if name not in TASKS:
    raise ValueError(f"Unknown GLUE task {name!r}; known: {sorted(TASKS)}.")
  return TASKS[name]


@dataclasses.dataclass(frozen=True)
class PairExample:
  text_a: str
  text_b: str | None
  label: float | int  # class index, or the score for regression (0 in unlabelled test files)
  source: str         # "file:line", for error messages
  guid: str = ""      # the submission's index: test files' index column, dev's data row


def read_examples(task: GlueTask, split: str, skip_log: readers.SkipLog,
                  data_dir: str | None = None, limit: int | None = None) -> list[PairExample]:
  """The labelled examples of one split; bad rows (wrong field count, a label outside
  the task's label set, a score that is not a finite number in the task's range) go to
  `skip_log`. `limit` keeps the
  first N good rows (a stated, reproducible subsample)."""
  path = task.path(split, data_dir)
  examples = []
  for line, fields in readers.read_tsv(path, skip_log, task.num_columns, task.has_header):
    raw = fields[task.label_column].strip()
    if task.is_regression:
      low, high = task.score_range
      try:
        label = float(raw)
      except ValueError:
        label = math.nan
      if not low <= label <= high:  # (NaN compares false)
        skip_log.skip(path, line, f"score {raw!r} is not a number from {low:g} to {high:g}")
        continue
    elif raw in task.labels:
      label = task.labels.index(raw)
    else:
      skip_log.skip(path, line, f"label {raw!r} not in {task.name}'s label set {task.labels}")
      continue
    texts = [fields[c] for c in task.text_columns]
    examples.append(PairExample(texts[0], texts[1] if len(texts) > 1 else None, label,
                                f"{path}:{line}", str(line - 1 - task.has_header)))
    if limit is not None and len(examples) >= limit:
      break
  readers.require_rows(path, len(examples), skip_log)
  return examples


def read_test_examples(task: GlueTask, split: str, skip_log: readers.SkipLog,
                       data_dir: str | None = None,
                       limit: int | None = None) -> list[PairExample]:
  """The unlabelled rows of a GLUE test file (header, index column first)."""
  path = task.path(split, data_dir)
  columns = task.test_text_columns or task.text_columns
  examples = []
  for line, fields in readers.read_tsv(path, skip_log, has_header=True):
    texts = [fields[c] for c in columns]
    examples.append(PairExample(texts[0], texts[1] if len(texts) > 1 else None, 0,
                                f"{path}:{line}", fields[0]))
    if limit is not None and len(examples) >= limit:
      break
  readers.require_rows(path, len(examples), skip_log)
  return examples


def predictions_from_logits(task: GlueTask, logits: np.ndarray) -> np.ndarray:
  """Class indices, or the regression head's scores on the task's own scale."""
  logits = np.asarray(logits)
  if task.is_regression:
    return logits[..., 0] * task.label_scale + task.label_center
  return logits.argmax(-1)


def submission_labels(task: GlueTask, logits: np.ndarray) -> list[str]:
  """Predictions as the GLUE server reads them: label strings, or STS-B scores in [0, 5]."""
  predicted = predictions_from_logits(task, logits)
  if task.is_regression:
    return [f"{v:.3f}" for v in np.clip(predicted, 0.0, 5.0)]
  return [task.labels[i] for i in predicted]


def evaluate(task: GlueTask, logits: np.ndarray, labels: np.ndarray) -> dict[str, float]:
  """The leaderboard metrics of `task` (fractions) from head outputs and gold labels."""
  return metrics.compute(task.metrics, predictions_from_logits(task, logits), labels)
