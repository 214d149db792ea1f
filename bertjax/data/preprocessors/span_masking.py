"""SpanBERT span masking with span-boundary-objective (SBO) features.

Joshi et al. 2020, sec. 3.1: span lengths (in whole words) follow a geometric
distribution with p = 0.2 truncated to [1, 10] (renormalised, mean 3.8, as in
the released code); spans start at word starts; spans are drawn until 15% of
the tokens are covered; the 80/10/10 [MASK] / random / keep choice is made
once per span.

Sampling here is vectorised rather than rejection-based:
  1. budget M = rate x (number of words), rounded stochastically (as
     `masking.budget`); since span placement is uniform over words, the
     expected masked fraction of *tokens* is `rate` as well;
  2. span lengths l_1, l_2, ... are drawn until they reach M; the last one is
     shortened so the total is exactly M;
  3. the spans are placed in order at uniformly random non-overlapping
     positions, at least one unmasked word apart (a uniform random composition
     of the remaining words over the gaps), so every span has real, unmasked
     boundary tokens for SBO.
`rate` must be <= 0.5, which guarantees the gaps fit.

Input `input_ids` must hold its special tokens (e.g. [CLS] ... [SEP]), which
are never masked and serve as boundaries at the ends. Output features:
  mlm_targets int32 [L], mlm_weights float32 [L]        (as in masking.py)
  sbo_left / sbo_right int32 [L]: positions of the tokens just outside the span
    (clamped to [0, L-1]); sbo_pos int32 [L]: 1-based offset inside the span
    (sbo_pos = position - sbo_left); all three are 0 where mlm_weights is 0.
"""
from typing import Optional, Sequence

import numpy as np
import tensorflow as tf

from bertjax.data.preprocessors import masking
from bertjax.data.preprocessors import seeding


def span_length_probs(p: float = 0.2, max_len: int = 10) -> np.ndarray:
  """P(length = k) for k = 1..max_len: geometric(p) truncated and renormalised."""
  probs = p * (1 - p) ** np.arange(max_len)
  return probs / probs.sum()


def _sample_span_lengths(budget: tf.Tensor, probs: np.ndarray, seed) -> tf.Tensor:
  """Span lengths summing to exactly `budget` (last one shortened)."""
  k = tf.maximum(budget, 1)  # Every span is >= 1 word: `budget` draws suffice.
  logits = tf.constant(np.log(probs)[None], tf.float32)
  lengths = tf.cast(tf.random.stateless_categorical(logits, k, seed=seed)[0], tf.int32) + 1
  ends = tf.cumsum(lengths)
  starts = ends - lengths
  lengths = tf.minimum(lengths, budget - starts)
  return tf.boolean_mask(lengths, starts < budget)


def _place_spans(num_words: tf.Tensor, lengths: tf.Tensor, seed) -> tf.Tensor:
  """First word of each span: random, in order, >= 1 free word between spans."""
  num_spans = tf.size(lengths)
  free = num_words - tf.reduce_sum(lengths) - tf.maximum(num_spans - 1, 0)
  # Stars and bars: bar k sits at slot b_k of free + num_spans slots; the
  # stars before it are the free words before span k.
  slots = tf.argsort(tf.random.stateless_uniform([free + num_spans], seed=seed))
  bars = tf.sort(slots[:num_spans])
  return bars + tf.cumsum(lengths, exclusive=True)


def span_mask_tokens(ids: tf.Tensor, seed, *, mask_id: int, vocab_size: int,
                     special_ids: Sequence[int], rate: float = 0.15,
                     geometric_p: float = 0.2, max_span_words: int = 10,
                     mask_prob: float = 0.8, random_prob: float = 0.1,
                     is_continuation: Optional[np.ndarray] = None) -> dict:
  """SpanBERT corruption of one 1-D id sequence; returns the output features."""
  if not 0.0 <= rate <= 0.5:
    raise ValueError(f"SpanBERT masking rate must be in [0, 0.5], got {rate}.")
  s_budget, s_len, s_place, s_decide, s_random = seeding.split_seed(seed, 5)
  length = tf.size(ids)
  eligible, wid, num_words = masking.word_ids(ids, special_ids, is_continuation)
  positions = tf.range(length)
  word_first = tf.math.unsorted_segment_min(positions, wid, num_words)
  word_last = tf.math.unsorted_segment_max(positions, wid, num_words)

  lengths = _sample_span_lengths(masking.budget(num_words, rate, s_budget),
                                 span_length_probs(geometric_p, max_span_words), s_len)
  starts = _place_spans(num_words, lengths, s_place)
  num_spans = tf.size(lengths)

  # Word -> span id (-1 outside spans), then token -> span id.
  span_words = tf.ragged.range(starts, starts + lengths)
  span_of_word = tf.tensor_scatter_nd_update(
      tf.fill([num_words], -1), span_words.flat_values[:, None],
      tf.cast(span_words.value_rowids(), tf.int32))
  span = tf.where(eligible, masking.gather_words(span_of_word + 1, wid) - 1, -1)
  selected = span >= 0

  left = tf.gather(word_first, starts) - 1
  right = tf.gather(word_last, starts + lengths - 1) + 1
  left_of_token = masking.gather_words(left, span)
  sbo_left = tf.where(selected, tf.maximum(left_of_token, 0), 0)
  sbo_right = tf.where(selected, tf.minimum(masking.gather_words(right, span), length - 1), 0)
  sbo_pos = tf.where(selected, positions - left_of_token, 0)

  span_decision = tf.random.stateless_uniform([num_spans], seed=s_decide)
  decision = masking.gather_words(span_decision, span)
  out_ids, targets, weights = masking.corrupt(
      ids, selected, decision, s_random, mask_id, vocab_size, special_ids,
      mask_prob, random_prob)
  return {"input_ids": out_ids, "mlm_targets": targets, "mlm_weights": weights,
          "sbo_left": sbo_left, "sbo_right": sbo_right, "sbo_pos": sbo_pos}


def span_mask(dataset: tf.data.Dataset, *, mask_id: int, vocab_size: int,
              special_ids: Sequence[int], rate: float = 0.15, geometric_p: float = 0.2,
              max_span_words: int = 10, mask_prob: float = 0.8, random_prob: float = 0.1,
              is_continuation: Optional[np.ndarray] = None, key: str = "input_ids",
              seed: Optional[int] = None) -> tf.data.Dataset:
  """seqio preprocessor: SpanBERT masking of `key` plus SBO features.

  Dynamic when placed after the Task's CacheDatasetPlaceholder (SpanBERT
  re-masks every epoch); seeds as in `masking.mlm_mask`.
  """
  def fn(ex, seed):
    ex = dict(ex)
    features = span_mask_tokens(
        tf.cast(ex[key], tf.int32), seed, mask_id=mask_id, vocab_size=vocab_size,
        special_ids=special_ids, rate=rate, geometric_p=geometric_p,
        max_span_words=max_span_words, mask_prob=mask_prob, random_prob=random_prob,
        is_continuation=is_continuation)
    ex[key] = features.pop("input_ids")
    ex.update(features)
    return ex

  return seeding.map_with_seed(dataset, fn, seed=seed)
