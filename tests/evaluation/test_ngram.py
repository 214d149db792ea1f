"""The count models a masked LM's held-out loss is judged against."""
import math

from hypothesis import given, settings, strategies as st
import numpy as np
import pytest

from bertjax.evaluation import ngram


def test_unigram_and_bigram_cross_entropy_by_hand():
  counts = ngram.NgramCounts(vocab_size=3, smoothing=0.5, interpolations=(0.7,))
  counts.add([0, 1, 0, 1])
  counts.add([2])
  # unigram counts 2, 2, 1 (+0.5 each): 2.5 / 6.5, 2.5 / 6.5, 1.5 / 6.5
  uni = np.array([2.5, 2.5, 1.5]) / 6.5
  # left neighbours: 0 -> 1 twice (c(0) = 2), 1 -> 0 once (c(1) = 1)
  got = counts.cross_entropy([[0, 1, 2]])
  p_first = uni[0]
  p_second = 0.7 * 1.0 + 0.3 * uni[1]   # P(1 | 0)
  p_third = 0.7 * 0.0 + 0.3 * uni[2]    # P(2 | 1): never seen after 1
  assert got["tokens"] == 3 and got["bigram_interpolation"] == 0.7
  assert got["unigram"] == pytest.approx(-np.log(uni[[0, 1, 2]]).mean())
  assert got["bigram"] == pytest.approx(-(math.log(p_first) + math.log(p_second)
                                          + math.log(p_third)) / 3)


@settings(max_examples=30, deadline=None)
@given(st.lists(st.lists(st.integers(0, 6), min_size=1, max_size=20), min_size=1, max_size=8),
       st.integers(0, 6))
def test_the_bigram_is_a_distribution_after_every_left_token(documents, left):
  counts = ngram.NgramCounts(vocab_size=7, interpolations=(0.8,))
  for ids in documents:
    counts.add(ids)
  # P(w | left) over every w: the mean nats of [left, w] minus the unigram's nats for `left`
  # gives -log P(w | left) per w; the probabilities must add up to 1.
  p_left = counts.unigram_probs()[left]
  total = sum(math.exp(-(2 * counts.cross_entropy([[left, w]])["bigram"] + math.log(p_left)))
              for w in range(7))
  assert total == pytest.approx(1.0)


def test_counts_merge_in_chunks_as_if_at_once():
  rng = np.random.default_rng(0)
  documents = [rng.integers(0, 50, 1000) for _ in range(12)]
  one = ngram.NgramCounts(50)
  for d in documents:
    one.add(d)
    one._merge()  # pylint: disable=protected-access
  two = ngram.NgramCounts(50)
  for d in documents:
    two.add(d)
  held_out = [rng.integers(0, 50, 300)]
  assert one.cross_entropy(held_out) == two.cross_entropy(held_out)


def test_the_strongest_interpolation_is_reported():
  counts = ngram.NgramCounts(5, interpolations=(0.1, 0.5, 0.9))
  for _ in range(50):
    counts.add([1, 2, 3, 4])  # a fixed order: the counts should be trusted
  got = counts.cross_entropy([[1, 2, 3, 4]])
  assert got["bigram_interpolation"] == 0.9
  alone = {lam: ngram.NgramCounts(5, interpolations=(lam,)) for lam in (0.1, 0.5, 0.9)}
  for single in alone.values():
    for _ in range(50):
      single.add([1, 2, 3, 4])
  assert got["bigram"] == min(c.cross_entropy([[1, 2, 3, 4]])["bigram"] for c in alone.values())


def test_bad_ids_and_empty_held_out_text_are_refused():
  counts = ngram.NgramCounts(4)
  with pytest.raises(ValueError, match="Token id 4 is outside the vocabulary of 4 ids"):
    counts.add([1, 4])
  with pytest.raises(ValueError, match="hold no tokens"):
    counts.cross_entropy([[]])
