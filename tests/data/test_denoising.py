"""BART denoising: text infilling, sentence permutation, rotation, deletion."""
import collections
import math

from hypothesis import given, settings, strategies as st
import numpy as np
import pytest
import tensorflow as tf

from bertjax.data.preprocessors import denoising as bart
from bertjax.data.preprocessors import stats

MASK, BOS, EOS, DOT = 4, 0, 2, 5
TEXT_IDS = st.integers(10, 500)
SEEDS = st.tuples(st.integers(0, 2**31 - 1), st.integers(0, 2**31 - 1))
FAST = settings(max_examples=25, deadline=None)


def seed_of(seed):
  return tf.constant(seed, tf.int64)


def unmask(noised, lengths, original):
  """Expands mask k back into the next lengths[k] original tokens."""
  out, source, k = [], iter(original), 0
  for t in noised:
    if t == MASK:
      out.extend(next(source) for _ in range(lengths[k]))
      k += 1
    else:
      assert t == next(source)
      out.append(t)
  assert k == len(lengths)
  return out


@FAST
@given(st.lists(TEXT_IDS, min_size=0, max_size=200), SEEDS,
       st.sampled_from([0.15, 0.3, 0.5]))
def test_infilling_bookkeeping(tokens, seed, ratio):
  noised, lengths = bart.text_infilling(tf.constant(tokens, tf.int32), seed_of(seed),
                                        mask_id=MASK, mask_ratio=ratio)
  noised, lengths = noised.numpy().tolist(), lengths.numpy().tolist()
  # Every mask stands for exactly one span; expanding them gives the text back.
  assert unmask(noised, lengths, tokens) == tokens
  n, masked = len(tokens), sum(lengths)
  assert masked == min(math.ceil(np.float32(n) * np.float32(ratio)), n)
  assert ratio * n <= masked < ratio * n + 1 or n == 0
  assert len(noised) == n - masked + len(lengths)
  assert noised.count(MASK) == len(lengths) and min(lengths, default=0) >= 0


def test_infilling_span_statistics():
  """Poisson(3) spans: mean ~3 including 0-length (insertion) spans."""
  tokens = tf.range(10, 20010)
  _, lengths = bart.text_infilling(tokens, seed_of((3, 4)), mask_id=MASK, poisson_lambda=3.0)
  lengths = lengths.numpy()
  assert lengths.sum() == 6000
  assert abs(lengths[:-1].mean() - 3.0) < 0.15
  assert abs((lengths[:-1] == 0).mean() - math.exp(-3.0)) < 0.02  # insertions exist


def sentences(tokens):
  out, current = [], []
  for t in tokens:
    current.append(t)
    if t == DOT:
      out.append(tuple(current))
      current = []
  return out + ([tuple(current)] if current else [])


@FAST
@given(st.lists(st.lists(TEXT_IDS, min_size=0, max_size=8), min_size=1, max_size=8), SEEDS)
def test_sentence_permutation_is_a_permutation(sents, seed):
  tokens = [t for s in sents for t in s + [DOT]]
  out = bart.bart_denoise_example(tf.constant(tokens, tf.int32), seed_of(seed), mask_id=MASK,
                                  mask_ratio=0.0, sentence_end_ids=[DOT])
  assert out['targets'].numpy().tolist() == tokens
  permuted = out['inputs'].numpy().tolist()
  assert sorted(sentences(permuted)) == sorted(sentences(tokens))
  assert permuted[-1] == DOT  # every sentence kept its end token


def test_sentence_permutation_from_a_field_and_shuffles():
  tokens = tf.range(100, 130)
  ids = tf.constant([i // 3 for i in range(30)])  # ten 3-token sentences
  seen = set()
  for s in range(5):
    out = bart.permute_sentences(tokens, ids, seed_of((s, 0))).numpy().reshape(10, 3)
    assert sorted(map(tuple, out)) == [tuple(range(100 + 3 * k, 103 + 3 * k)) for k in range(10)]
    seen.add(tuple(out[:, 0]))
  assert len(seen) > 1


@FAST
@given(st.lists(TEXT_IDS, min_size=0, max_size=60), SEEDS)
def test_rotation_and_deletion(tokens, seed):
  rotated = bart.rotate_document(tf.constant(tokens, tf.int32), seed_of(seed)).numpy().tolist()
  assert len(rotated) == len(tokens)
  if len(tokens) >= 2:
    offset = next(k for k in range(1, len(tokens)) if tokens[k:] + tokens[:k] == rotated)
    assert 1 <= offset < len(tokens)
  kept = bart.delete_tokens(tf.constant(tokens, tf.int32), seed_of(seed), 0.3).numpy().tolist()
  it = iter(tokens)
  assert all(t in it for t in kept)


def test_full_pipeline_targets_are_the_text():
  rng = np.random.default_rng(1)
  tokens = [t for _ in range(30) for t in rng.integers(10, 500, size=rng.integers(1, 12)).tolist()
            + [DOT]]
  out = bart.bart_denoise_example(tf.constant(tokens, tf.int32), seed_of((7, 7)), mask_id=MASK,
                                  sentence_end_ids=[DOT], rotate=True, delete_ratio=0.1,
                                  bos_id=BOS, eos_id=EOS)
  inputs, targets = out['inputs'].numpy().tolist(), out['targets'].numpy().tolist()
  assert targets == [BOS] + tokens + [EOS]
  assert inputs[0] == BOS and inputs[-1] == EOS and MASK in inputs
  body = collections.Counter(t for t in inputs[1:-1] if t != MASK)
  assert not body - collections.Counter(tokens)


def _run(dataset):
  return [{k: v.tolist() for k, v in ex.items()} for ex in dataset.as_numpy_iterator()]


def test_dataset_determinism_chunks_and_empty_documents():
  docs = [list(range(10, 60)) + [DOT], [], [11, DOT], [], list(range(100, 110))]
  ds = tf.data.Dataset.from_tensor_slices({'targets': tf.ragged.constant(docs, tf.int32)})
  before = stats.snapshot().get('bart/dropped_empty_document', 0)
  run = lambda seed: _run(bart.bart_denoise(ds, {'inputs': 24, 'targets': 24}, mask_id=MASK,
                                            sentence_end_ids=[DOT], bos_id=BOS, eos_id=EOS,
                                            seed=seed))
  first = run(3)
  assert first == run(3) and first != run(4)
  assert stats.snapshot()['bart/dropped_empty_document'] - before == 6  # 2 per run
  # 51 tokens -> chunks of 22 + BOS/EOS: 3 chunks; then 1 and 1 chunk.
  assert len(first) == 5 and all(len(ex['targets']) <= 24 for ex in first)
  text = [t for ex in first for t in ex['targets'][1:-1]]
  assert text == [t for d in docs for t in d]


def test_sentence_field_and_errors():
  ds = tf.data.Dataset.from_tensor_slices({
      'targets': tf.ragged.constant([[10, 11, 12, 13]]), 'sent': tf.ragged.constant([[0, 0, 1, 1]])})
  out = _run(bart.bart_denoise(ds, mask_id=MASK, mask_ratio=0.0, sentence_key='sent', seed=0))
  assert out[0]['inputs'] in ([10, 11, 12, 13], [12, 13, 10, 11])
  with pytest.raises(ValueError, match='sentence boundaries'):
    bart.bart_denoise_example(tf.constant([1, 2]), seed_of((0, 0)), mask_id=MASK)
