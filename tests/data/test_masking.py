"""BERT MLM masking: rates, special tokens, 80/10/10, whole words, static vs dynamic."""
import hypothesis
from hypothesis import strategies as st
import numpy as np
import pytest
import seqio
import tensorflow as tf

from bertjax.data.preprocessors import masking

MASK, VOCAB = 3, 5000
SPECIAL = (0, 1, 2, 3)  # pad, cls, sep, mask


@tf.function(reduce_retracing=True)
def _mask(ids, seed, is_cont):
  return masking.mask_tokens(ids, seed, mask_id=MASK, vocab_size=VOCAB, special_ids=SPECIAL,
                             is_continuation=is_cont)


def mask(ids, seed=(0, 0), is_cont=None):
  table = np.zeros([VOCAB], bool) if is_cont is None else is_cont
  out = _mask(tf.constant(ids, tf.int32), tf.constant(seed, tf.int64), tf.constant(table))
  return [t.numpy() for t in out]


def test_rate_is_exact_in_expectation_and_binomially_close():
  ids = np.random.RandomState(0).randint(4, VOCAB, size=20000)
  _, _, weights = mask(ids)
  # Budget = floor(0.15 n + u): within one token of 15%.
  assert abs(weights.sum() - 0.15 * ids.size) <= 1
  # Many short rows: the total stays within 4 binomial standard deviations.
  total, n = 0, 0
  for i in range(200):
    row = np.random.RandomState(i).randint(4, VOCAB, size=7)
    total += mask(row, seed=(i, 1))[2].sum()
    n += row.size
  assert abs(total - 0.15 * n) < 4 * np.sqrt(n * 0.15 * 0.85)


@hypothesis.settings(max_examples=25, deadline=None)
@hypothesis.given(st.lists(st.integers(0, 40), min_size=1, max_size=60), st.integers(0, 2**30))
def test_special_and_pad_tokens_never_selected(ids, seed):
  out, targets, weights = mask(ids, seed=(seed, 7))
  ids = np.asarray(ids)
  special = np.isin(ids, SPECIAL)
  assert not weights[special].any()
  np.testing.assert_array_equal(out[special], ids[special])  # untouched
  np.testing.assert_array_equal(targets, np.where(weights > 0, ids, 0))
  np.testing.assert_array_equal(out[weights == 0], ids[weights == 0])


def test_80_10_10_proportions():
  ids = np.random.RandomState(1).randint(4, VOCAB, size=60000)
  out, _, weights = mask(ids, seed=(3, 3))
  sel = weights > 0
  n = sel.sum()
  masked = (out[sel] == MASK).mean()
  kept = (out[sel] == ids[sel]).mean()
  randomized = 1 - masked - kept
  sd = np.sqrt(0.1 * 0.9 / n)
  assert abs(masked - 0.8) < 5 * np.sqrt(0.16 / n)
  assert abs(kept - 0.1) < 5 * sd + 1 / VOCAB  # a random id can equal the original
  assert abs(randomized - 0.1) < 5 * sd + 1 / VOCAB
  assert not np.isin(out[sel & (out != MASK) & (out != ids)], SPECIAL).any()


@hypothesis.settings(max_examples=25, deadline=None)
@hypothesis.given(st.lists(st.integers(1, 29), min_size=1, max_size=80), st.integers(0, 2**30))
def test_whole_word_masking_never_splits_a_word(ids, seed):
  # Ids 20..29 are continuations ('##x'); 1..3 are specials (never in a word).
  table = np.zeros([VOCAB], bool)
  table[20:30] = True
  ids = np.asarray(ids)
  _, _, weights = mask(ids, seed=(seed, 1), is_cont=table)
  eligible = ~np.isin(ids, SPECIAL)
  starts = eligible & (~table[ids] | ~np.concatenate([[False], eligible[:-1]]))
  word = np.where(eligible, np.cumsum(starts) - 1, -1)
  for w in range(starts.sum()):
    sel = weights[word == w]
    assert sel.all() or not sel.any(), (ids, weights)


def test_whole_word_rate_stays_close_to_target():
  rng = np.random.RandomState(2)
  table = np.zeros([VOCAB], bool)
  table[2000:] = True  # ~60% continuations: words of 1-5 pieces.
  ids = rng.randint(4, VOCAB, size=30000)
  _, _, weights = mask(ids, seed=(9, 9), is_cont=table)
  assert abs(weights.mean() - 0.15) < 0.01


def test_continuation_tables():
  wp = masking.continuation_table(["[PAD]", "[CLS]", "un", "##believ", "##able", "#"],
                                  masking.WORDPIECE, ["[PAD]", "[CLS]"])
  np.testing.assert_array_equal(wp, [0, 0, 0, 1, 1, 0])
  sp = masking.continuation_table(["<pad>", "[CLS]", "\u2581un", "believ", "able", "\u2581."],
                                  masking.SENTENCEPIECE)
  np.testing.assert_array_equal(sp, [0, 0, 0, 1, 1, 0])
  bl = masking.continuation_table(["<s>", "\u0120un", "believ"], masking.BYTELEVEL)
  np.testing.assert_array_equal(bl, [0, 0, 1])
  with pytest.raises(ValueError, match="Unknown continuation style"):
    masking.continuation_table(["a"], "bpe")


def test_same_seed_same_output_and_seeds_differ():
  ids = np.arange(4, 400)
  a, b = mask(ids, seed=(5, 5)), mask(ids, seed=(5, 5))
  c = mask(ids, seed=(5, 6))
  for x, y in zip(a, b):
    np.testing.assert_array_equal(x, y)
  assert not np.array_equal(a[2], c[2])


def _examples(n=6, length=40):
  return tf.data.Dataset.from_tensor_slices(
      {"input_ids": np.random.RandomState(0).randint(4, VOCAB, size=(n, length)).astype(np.int32)})


def _mlm(ds):
  return masking.mlm_mask(ds, mask_id=MASK, vocab_size=VOCAB, special_ids=SPECIAL)


def _epochs(ds, n):
  rows = [ex["mlm_weights"] for ex in ds.as_numpy_iterator()]
  return np.stack(rows).reshape(n, -1, rows[0].shape[-1])


def test_static_masks_repeat_across_epochs_dynamic_ones_differ():
  with seqio.utils.map_seed_manager(11):
    static = _mlm(_examples()).repeat(2)  # Masking before repeat (pre-cache).
  with seqio.utils.map_seed_manager(11):
    dynamic = _mlm(_examples().repeat(2))  # Masking after repeat (post-cache).
  s, d = _epochs(static, 2), _epochs(dynamic, 2)
  np.testing.assert_array_equal(s[0], s[1])
  assert not np.array_equal(d[0], d[1])
  np.testing.assert_array_equal(s[0], d[0])  # Same seed stream -> same first epoch.


def test_duplicate_examples_get_different_masks_a_whole_pass_apart():
  ds = masking.duplicate_examples(_examples(n=2), dupe_factor=10)
  ids = [ex["input_ids"].tobytes() for ex in ds.as_numpy_iterator()]
  assert len(ids) == 20 and ids[::2] == [ids[0]] * 10 and ids[1::2] == [ids[1]] * 10
  with seqio.utils.map_seed_manager(3):
    weights = _epochs(_mlm(ds), 1)[0]
  assert len({w.tobytes() for w in weights[::2]}) == 10
  with pytest.raises(ValueError, match="dupe_factor"):
    masking.duplicate_examples(ds, 0)


def test_mlm_mask_with_explicit_seed_is_deterministic():
  run = lambda: _epochs(masking.mlm_mask(_examples(), mask_id=MASK, vocab_size=VOCAB,
                                         special_ids=SPECIAL, seed=42), 1)
  np.testing.assert_array_equal(run(), run())


def test_bad_probabilities_raise():
  with pytest.raises(ValueError, match="masking probabilities"):
    masking.mask_tokens(tf.constant([5, 6]), tf.constant([0, 0]), mask_id=MASK,
                        vocab_size=VOCAB, special_ids=SPECIAL, rate=1.5)
