"""Classification and regression metrics exactly as the GLUE leaderboard computes them.

Plain numpy on host arrays of predictions and labels; each is tested equal to the
scikit-learn / scipy reference on the same inputs (tests/finetune/test_metrics.py).
All scores are returned as fractions in [0, 1] (or [-1, 1] for correlations); callers
multiply by 100 for tables.
"""
from typing import Callable, Mapping

import numpy as np


def accuracy(predictions, labels) -> float:
  predictions, labels = np.asarray(predictions), np.asarray(labels)
  _check_same_length(predictions, labels)
  return float(np.mean(predictions == labels)) if labels.size else 0.0


def f1_binary(predictions, labels, positive=1) -> float:
  """F1 of the positive class (MRPC / QQP report this with accuracy); 0 when undefined."""
  predictions, labels = np.asarray(predictions), np.asarray(labels)
  _check_same_length(predictions, labels)
  tp = np.sum((predictions == positive) & (labels == positive))
  predicted, actual = np.sum(predictions == positive), np.sum(labels == positive)
  if predicted + actual == 0:
    return 0.0
  return float(2 * tp / (predicted + actual))


def matthews_corrcoef(predictions, labels) -> float:
  """Matthews correlation (CoLA), in the multi-class form of Gorodkin (2004).

  Computed from the confusion matrix C: with t = row sums (true counts), p = column
  sums (predicted counts), c = trace and s = total,
  MCC = (c*s - t.p) / sqrt((s^2 - p.p) (s^2 - t.t)); 0 when a denominator vanishes
  (every prediction or every label one class), as scikit-learn does.
  """
  predictions, labels = np.asarray(predictions), np.asarray(labels)
  _check_same_length(predictions, labels)
  classes, index = np.unique(np.concatenate([labels, predictions]), return_inverse=True)
  true_idx, pred_idx = index[:len(labels)], index[len(labels):]
  confusion = np.zeros((len(classes), len(classes)), np.float64)
  np.add.at(confusion, (true_idx, pred_idx), 1.0)
  t, p = confusion.sum(1), confusion.sum(0)
  c, s = np.trace(confusion), confusion.sum()
  denominator = np.sqrt((s * s - p @ p) * (s * s - t @ t))
  return float((c * s - t @ p) / denominator) if denominator > 0 else 0.0


def pearson(x, y) -> float:
  x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
  _check_same_length(x, y)
  x, y = _unit_scale(x - x.mean()), _unit_scale(y - y.mean())
  denominator = np.sqrt((x @ x) * (y @ y))
  return float(x @ y / denominator) if denominator > 0 else float("nan")


def _unit_scale(deviations: np.ndarray) -> np.ndarray:
  """Deviations divided by their largest magnitude: correlation is scale-free, and tiny
  deviations (1e-190) would otherwise underflow to 0 when squared."""
  peak = np.max(np.abs(deviations), initial=0.0)
  return deviations / peak if peak > 0 else deviations


def spearman(x, y) -> float:
  """Pearson correlation of the ranks, ties sharing their average rank."""
  return pearson(_average_ranks(x), _average_ranks(y))


def _average_ranks(values) -> np.ndarray:
  values = np.asarray(values, np.float64)
  order = np.argsort(values, kind="mergesort")
  sorted_values = values[order]
  # Boundaries of runs of equal values; each run gets the mean of its 1-based ranks.
  starts = np.flatnonzero(np.r_[True, sorted_values[1:] != sorted_values[:-1]])
  ends = np.r_[starts[1:], len(values)]
  run_ranks = (starts + ends + 1) / 2.0
  ranks = np.empty(len(values), np.float64)
  ranks[order] = np.repeat(run_ranks, ends - starts)
  return ranks


def _check_same_length(a: np.ndarray, b: np.ndarray) -> None:
  if a.shape != b.shape:
    raise ValueError(f"Predictions and labels differ in shape: {a.shape} vs {b.shape}.")


# Metric name -> function(predictions, labels); the names are the GLUE leaderboard's.
METRICS: Mapping[str, Callable[..., float]] = {
    "accuracy": accuracy,
    "f1": f1_binary,
    "mcc": matthews_corrcoef,
    "pearson": pearson,
    "spearman": spearman,
}


def compute(names, predictions, labels) -> dict[str, float]:
  """{name: METRICS[name](predictions, labels)} for each requested metric name."""
  unknown = [n for n in names if n not in METRICS]
  if unknown:
    raise ValueError(f"Unknown metric(s) {unknown}; known: {sorted(METRICS)}.")
  return {name: METRICS[name](predictions, labels) for name in names}
