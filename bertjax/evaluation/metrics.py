"""Classification and regression metrics as the GLUE leaderboard computes them.

scikit-learn gives accuracy, F1 and MCC, scipy Pearson and Spearman, called as the GLUE
reference scripts call them. The wrappers take host arrays of (predictions, labels),
check that they align, and return plain floats: fractions in [0, 1] (or [-1, 1] for
correlations); callers multiply by 100 for tables.
"""
from typing import Callable, Mapping

import numpy as np
import scipy.stats
import sklearn.metrics


def accuracy(predictions, labels) -> float:
  predictions, labels = _aligned(predictions, labels)
  return float(sklearn.metrics.accuracy_score(labels, predictions))


def f1_binary(predictions, labels, positive=1) -> float:
  """F1 of the positive class (MRPC / QQP report this with accuracy); 0 when undefined
  (no positive prediction and no positive label)."""
  predictions, labels = _aligned(predictions, labels)
  return float(sklearn.metrics.f1_score(labels, predictions, pos_label=positive,
                                        zero_division=0))


def matthews_corrcoef(predictions, labels) -> float:
  """Matthews correlation (CoLA), multi-class; 0 when every prediction or every label
  is one class."""
  predictions, labels = _aligned(predictions, labels)
  return float(sklearn.metrics.matthews_corrcoef(labels, predictions))


def pearson(x, y) -> float:
  """Pearson's r; NaN when either side is constant (see `_constant`)."""
  x, y = _aligned(x, y, np.float64)
  if _constant(x) or _constant(y):
    return float("nan")
  return float(scipy.stats.pearsonr(x, y).statistic)


def spearman(x, y) -> float:
  """Spearman's rho (Pearson of the ranks, ties sharing their average rank); NaN when
  either side is constant."""
  x, y = _aligned(x, y, np.float64)
  if _constant(x) or _constant(y):
    return float("nan")
  return float(scipy.stats.spearmanr(x, y).statistic)


def _constant(values: np.ndarray) -> bool:
  """A correlation with a constant input is undefined. scipy returns NaN for it but
  also raises a ConstantInputWarning on every call, so the case is answered here,
  with an explicit NaN and no warning."""
  return bool(np.all(values == values[0]))


def _aligned(predictions, labels, dtype=None) -> tuple[np.ndarray, np.ndarray]:
  predictions, labels = np.asarray(predictions, dtype), np.asarray(labels, dtype)
  if predictions.shape != labels.shape:
    raise ValueError(f"Predictions and labels differ in shape: {predictions.shape} vs "
                     f"{labels.shape}.")
  if not labels.size:
    raise ValueError("No predictions to score: predictions and labels are empty.")
  return predictions, labels


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
