"""GLUE metrics: scikit-learn / scipy's numbers through our (predictions, labels) wrappers,
the leaderboard's hand-checked values, NaN for a constant input, and clear errors."""
import warnings

import numpy as np
import pytest
import scipy.stats
import sklearn.metrics
from hypothesis import given, settings, strategies as st

from bertjax.evaluation import metrics

labels_and_preds = st.integers(1, 60).flatmap(lambda n: st.tuples(
    st.lists(st.integers(0, 2), min_size=n, max_size=n),
    st.lists(st.integers(0, 2), min_size=n, max_size=n)))


@settings(max_examples=60, deadline=None)
@given(labels_and_preds)
def test_accuracy_and_mcc_match_sklearn(pair):
  labels, preds = map(np.asarray, pair)
  assert metrics.accuracy(preds, labels) == pytest.approx(
      sklearn.metrics.accuracy_score(labels, preds))
  assert metrics.matthews_corrcoef(preds, labels) == pytest.approx(
      sklearn.metrics.matthews_corrcoef(labels, preds), abs=1e-12)


@settings(max_examples=60, deadline=None)
@given(labels_and_preds)
def test_binary_f1_matches_sklearn(pair):
  labels, preds = (np.minimum(np.asarray(x), 1) for x in pair)
  expected = sklearn.metrics.f1_score(labels, preds, pos_label=1, zero_division=0)
  assert metrics.f1_binary(preds, labels) == pytest.approx(expected)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 5), st.floats(-3, 3, allow_nan=False)),
                min_size=3, max_size=50))
def test_correlations_match_scipy_with_ties(rows):
  # Integer-valued x gives many ties, which is where Spearman implementations differ.
  x = np.array([r[0] for r in rows], np.float64)
  y = np.array([r[1] for r in rows], np.float64)
  if np.ptp(x) == 0 or np.ptp(y) == 0:
    assert np.isnan(metrics.pearson(x, y)) and np.isnan(metrics.spearman(x, y))
    return
  assert metrics.pearson(x, y) == pytest.approx(scipy.stats.pearsonr(x, y)[0], abs=1e-9)
  assert metrics.spearman(x, y) == pytest.approx(scipy.stats.spearmanr(x, y)[0], abs=1e-9)


def test_hand_checked_values():
  # Deviations whose squares underflow (found by hypothesis) still correlate perfectly.
  assert metrics.pearson([0, 0, 1], [0.0, 0.0, 1.14e-190]) == pytest.approx(1.0)
  # CoLA-style: 3 TP, 1 FN, 1 FP, 3 TN -> MCC = (9 - 1) / sqrt(4*4*4*4) = 0.5.
  labels = [1, 1, 1, 1, 0, 0, 0, 0]
  preds = [1, 1, 1, 0, 1, 0, 0, 0]
  assert metrics.matthews_corrcoef(preds, labels) == pytest.approx(0.5)
  assert metrics.f1_binary(preds, labels) == pytest.approx(0.75)
  assert metrics.accuracy(preds, labels) == pytest.approx(0.75)
  assert metrics.matthews_corrcoef([1, 1, 1], [0, 1, 0]) == 0.0  # constant predictions
  assert metrics.spearman([1, 2, 3, 4], [10, 20, 30, 400]) == pytest.approx(1.0)


def test_constant_input_correlates_as_nan_without_a_warning():
  # Found by hypothesis: a mean that is not exact (3 x 0.1) once gave r = -5e-17.
  with warnings.catch_warnings():
    warnings.simplefilter("error")
    for correlation in (metrics.pearson, metrics.spearman):
      assert np.isnan(correlation([0, 0, 1], [0.1, 0.1, 0.1]))
      assert np.isnan(correlation([2.0, 2.0], [1.0, 3.0]))
      assert np.isnan(correlation([4.0], [1.0]))


def test_compute_rejects_unknown_metric_and_shape_mismatch():
  assert metrics.compute(["accuracy", "f1"], [1, 0], [1, 1]) == {"accuracy": 0.5,
                                                                 "f1": pytest.approx(2 / 3)}
  with pytest.raises(ValueError, match="Unknown metric"):
    metrics.compute(["bleu"], [1], [1])
  with pytest.raises(ValueError, match="differ in shape"):
    metrics.accuracy([1, 0], [1])
  with pytest.raises(ValueError, match="empty"):
    metrics.pearson([], [])
