"""SpanBERT span masking: span lengths, word starts, SBO boundaries, per-span 80/10/10."""
import hypothesis
from hypothesis import strategies as st
import numpy as np
import pytest
import tensorflow as tf

from bertjax.data.preprocessors import span_masking

CLS, SEP, MASK, VOCAB = 1, 2, 3, 3000
SPECIAL = (0, 1, 2, 3)


@tf.function(reduce_retracing=True)
def _span(ids, seed, table):
  return span_masking.span_mask_tokens(ids, seed, mask_id=MASK, vocab_size=VOCAB,
                                       special_ids=SPECIAL, is_continuation=table)


def span(ids, seed=(0, 0), table=None):
  table = np.zeros([VOCAB], bool) if table is None else table
  out = _span(tf.constant(ids, tf.int32), tf.constant(seed, tf.int64), tf.constant(table))
  return {k: v.numpy() for k, v in out.items()}


def runs(selected):
  """(start, end) of maximal runs of True."""
  padded = np.concatenate([[0], selected.astype(int), [0]])
  edges = np.flatnonzero(np.diff(padded))
  return list(zip(edges[::2], edges[1::2]))


def sequence(n, rng):
  return np.concatenate([[CLS], rng.randint(10, VOCAB, size=n), [SEP]])


def test_span_length_distribution_and_clip():
  rng = np.random.RandomState(0)
  lengths = []
  for i in range(60):
    out = span(sequence(400, rng), seed=(i, 0))
    spans = runs(out["mlm_weights"] > 0)
    lengths.extend(e - s for s, e in spans[:-1])  # The last span may be shortened.
  lengths = np.asarray(lengths)
  assert lengths.max() <= 10 and lengths.min() >= 1
  probs = span_masking.span_length_probs()
  expected_mean = (np.arange(1, 11) * probs).sum()
  assert abs(expected_mean - 3.8) < 0.05  # SpanBERT's reported mean
  sd = np.sqrt(((np.arange(1, 11) - expected_mean) ** 2 * probs).sum() / len(lengths))
  assert abs(lengths.mean() - expected_mean) < 5 * sd
  observed = np.bincount(lengths, minlength=11)[1:] / len(lengths)
  assert np.abs(observed - probs).max() < 0.05


def test_masking_rate_close_to_15_percent():
  rng = np.random.RandomState(1)
  total = sum(span(sequence(500, rng), seed=(i, 1))["mlm_weights"].sum() for i in range(20))
  n = 20 * 500
  assert abs(total / n - 0.15) < 0.01


@hypothesis.settings(max_examples=25, deadline=None)
@hypothesis.given(st.lists(st.integers(10, 60), min_size=1, max_size=80), st.integers(0, 2**30))
def test_spans_cover_whole_words_with_correct_sbo_features(body, seed):
  table = np.zeros([VOCAB], bool)
  table[40:61] = True  # continuation pieces
  ids = np.concatenate([[CLS], body, [SEP]])
  out = span(ids, seed=(seed, 3), table=table)
  sel = out["mlm_weights"] > 0
  assert not sel[[0, -1]].any()
  is_start = ~table[ids] | (np.arange(len(ids)) == 1)
  for s, e in runs(sel):
    assert is_start[s], "spans start at a word start"
    assert e == len(ids) - 1 or is_start[e], "spans end at a word end"
    np.testing.assert_array_equal(out["sbo_left"][s:e], s - 1)
    np.testing.assert_array_equal(out["sbo_right"][s:e], e)
    np.testing.assert_array_equal(out["sbo_pos"][s:e], np.arange(1, e - s + 1))
    assert not sel[s - 1] and not sel[e]  # boundaries are real, unmasked tokens
    # 80/10/10 is decided per span: all [MASK] or none.
    masked = out["input_ids"][s:e] == MASK
    assert masked.all() or not masked.any()
  for k in ("sbo_left", "sbo_right", "sbo_pos", "mlm_targets"):
    assert not out[k][~sel].any()
  np.testing.assert_array_equal(out["mlm_targets"][sel], ids[sel])


def test_per_span_decision_proportions():
  rng = np.random.RandomState(2)
  fates = []
  for i in range(40):
    ids = sequence(300, rng)
    out = span(ids, seed=(i, 5))
    for s, e in runs(out["mlm_weights"] > 0):
      got = out["input_ids"][s:e]
      fates.append("mask" if (got == MASK).all() else
                   "keep" if (got == ids[s:e]).all() else "random")
  fates = np.asarray(fates)
  n = len(fates)
  assert abs((fates == "mask").mean() - 0.8) < 5 * np.sqrt(0.16 / n)
  assert abs((fates == "keep").mean() - 0.1) < 5 * np.sqrt(0.09 / n)


def test_deterministic_and_tiny_inputs():
  ids = sequence(50, np.random.RandomState(3))
  a, b = span(ids, seed=(4, 4)), span(ids, seed=(4, 4))
  for k in a:
    np.testing.assert_array_equal(a[k], b[k])
  tiny = span(np.array([CLS, SEP]))
  assert not tiny["mlm_weights"].any()
  one = span(np.array([CLS, 77, SEP]), seed=(0, 9))
  assert one["mlm_weights"].sum() <= 1


def test_rate_above_half_is_rejected():
  with pytest.raises(ValueError, match="0.5"):
    span_masking.span_mask_tokens(tf.constant([1, 5, 2]), tf.constant([0, 0]), mask_id=MASK,
                                  vocab_size=VOCAB, special_ids=SPECIAL, rate=0.6)
