"""T5 span corruption and the paper's objective variants (bertjax.data.preprocessors.span_corruption)."""
import collections

from hypothesis import given, settings, strategies as st
import numpy as np
import pytest
import tensorflow as tf

from bertjax.data.preprocessors import span_corruption as sc
from bertjax.data.preprocessors import stats

VOCAB = 300
FIRST_SENTINEL = VOCAB - 1
NUM_SENTINELS = 100
SENTINELS = set(sc.sentinel_ids(FIRST_SENTINEL, NUM_SENTINELS))
EOS = 1
# Text ids stay clear of the sentinels, as in a real T5 vocabulary.
TEXT_IDS = st.integers(3, FIRST_SENTINEL - NUM_SENTINELS)
SEEDS = st.tuples(st.integers(0, 2**31 - 1), st.integers(0, 2**31 - 1))
FAST = settings(max_examples=25, deadline=None)


def corrupt(tokens, seed, **kwargs):
  kwargs.setdefault('first_sentinel_id', FIRST_SENTINEL)
  out = sc.denoise_example(tf.constant(tokens, tf.int32), tf.constant(seed, tf.int64), **kwargs)
  return out['inputs'].numpy().tolist(), out['targets'].numpy().tolist()


def reconstruct(inputs, targets):
  """Puts every sentinel's target span back in place of the sentinel."""
  spans, current = {}, None
  for t in targets:
    if t in SENTINELS:
      current = spans.setdefault(t, [])
    else:
      current.append(t)
  text = []
  for t in inputs:
    text.extend(spans[t] if t in SENTINELS else [t])
  return text


def is_subsequence(part, whole):
  it = iter(whole)
  return all(t in it for t in part)


def test_paper_example():
  """Figure 2 of the T5 paper: 'Thank you <X> me to your party <Y> week.'"""
  words = 'Thank you for inviting me to your party last week .'.split()
  ids = tf.range(10, 10 + len(words))
  noise = tf.constant([w in ('for', 'inviting', 'last') for w in words])
  inputs = sc.sentinel_inputs(ids, noise, FIRST_SENTINEL).numpy().tolist()
  targets = sc.sentinel_targets(ids, noise, FIRST_SENTINEL).numpy().tolist()
  x, y, z = FIRST_SENTINEL, FIRST_SENTINEL - 1, FIRST_SENTINEL - 2
  assert inputs == [10, 11, x, 14, 15, 16, 17, y, 19, 20]
  assert targets == [x, 12, 13, y, 18, z]  # kept text at the end -> closing sentinel


@FAST
@given(st.lists(TEXT_IDS, min_size=0, max_size=160), SEEDS,
       st.sampled_from([0.1, 0.15, 0.25, 0.5]), st.sampled_from([2.0, 3.0, 5.0, 10.0]))
def test_random_spans_reconstruct_and_counts(tokens, seed, density, mean_span):
  inputs, targets = corrupt(tokens, seed, noise_density=density,
                            mean_noise_span_length=mean_span)
  assert reconstruct(inputs, targets) == tokens
  n = len(tokens)
  sentinels_in = [t for t in inputs if t in SENTINELS]
  sentinels_out = [t for t in targets if t in SENTINELS]
  # Unique, descending from <extra_id_0>, and the same sequence on both sides.
  assert sentinels_in == sc.sentinel_ids(FIRST_SENTINEL, len(sentinels_in))
  assert sentinels_out[:len(sentinels_in)] == sentinels_in
  if n < 2:
    assert sentinels_in == []  # the stated short-text rule: no noise
    return
  # T5's deterministic counts (float32 like the TF graph).
  expected_noise = int(np.clip(np.round(np.float32(n) * np.float32(density)), 1, n - 1))
  expected_spans = max(int(np.round(np.float32(expected_noise) / np.float32(mean_span))), 1)
  noise = len(targets) - len(sentinels_out)
  assert noise == expected_noise and len(sentinels_in) == expected_spans
  if 1 < noise < n - 1:  # unclipped: the density is met to within rounding
    assert abs(noise - density * n) <= 0.5 + 1e-3
  # Random spans start with kept text and end with noise: no closing sentinel.
  assert inputs[0] not in SENTINELS and inputs[-1] in SENTINELS
  assert len(sentinels_out) == len(sentinels_in)
  # Every span is non-empty: no two sentinels are adjacent in the targets.
  assert all(not (a in SENTINELS and b in SENTINELS) for a, b in zip(targets, targets[1:]))


@FAST
@given(st.lists(TEXT_IDS, min_size=0, max_size=120), SEEDS,
       st.sampled_from([0.1, 0.15, 0.25, 0.5]))
def test_iid_replace_spans_reconstruct(tokens, seed, density):
  inputs, targets = corrupt(tokens, seed, objective='iid_replace_spans', noise_density=density)
  assert reconstruct(inputs, targets) == tokens
  sentinels_in = [t for t in inputs if t in SENTINELS]
  assert sentinels_in == sc.sentinel_ids(FIRST_SENTINEL, len(sentinels_in))
  # A closing sentinel follows the last span iff the text ends with kept tokens.
  closing = bool(tokens) and inputs[-1] not in SENTINELS
  assert [t for t in targets if t in SENTINELS] == sc.sentinel_ids(
      FIRST_SENTINEL, len(sentinels_in) + closing)


@FAST
@given(st.lists(TEXT_IDS, min_size=0, max_size=120), SEEDS)
def test_drop_prefix_deshuffle_split_the_text(tokens, seed):
  inputs, targets = corrupt(tokens, seed, objective='iid_drop_tokens')
  assert is_subsequence(inputs, tokens) and is_subsequence(targets, tokens)
  assert collections.Counter(inputs) + collections.Counter(targets) == collections.Counter(tokens)
  inputs, targets = corrupt(tokens, seed, objective='prefix_lm')
  assert inputs + targets == tokens
  if len(tokens) >= 2:
    assert 1 <= len(inputs) <= len(tokens) - 1
  inputs, targets = corrupt(tokens, seed, objective='deshuffling')
  assert targets == tokens and sorted(inputs) == sorted(tokens)


def test_bert_and_mass_style_rates():
  rng = np.random.default_rng(0)
  tokens = rng.integers(3, FIRST_SENTINEL - NUM_SENTINELS, size=20000).tolist()
  inputs, targets = corrupt(tokens, (1, 2), objective='bert_style', eos_id=EOS)
  assert targets == tokens + [EOS] and len(inputs) == len(targets)
  inputs, tokens_arr = np.array(inputs[:-1]), np.array(tokens)
  masked = inputs == FIRST_SENTINEL
  replaced = (inputs != tokens_arr) & ~masked
  assert abs(masked.mean() - 0.15 * 0.8) < 0.01
  # A random replacement can hit the same id; those count as "kept".
  assert abs(replaced.mean() - 0.15 * 0.1) < 0.005
  assert inputs[replaced].min() >= 3 and inputs[replaced].max() < FIRST_SENTINEL + 1 - NUM_SENTINELS
  inputs, targets = corrupt(tokens, (1, 2), objective='mass_style', mask_id=2)
  inputs = np.array(inputs)
  changed = inputs != tokens_arr
  assert targets == tokens and (inputs[changed] == 2).all()
  assert abs(changed.mean() - 0.15) < 0.01


def _dataset(docs):
  return tf.data.Dataset.from_tensor_slices({'targets': tf.ragged.constant(docs, tf.int32)})


def _run(dataset):
  return [{k: v.tolist() for k, v in ex.items()} for ex in dataset.as_numpy_iterator()]


DOCS = [list(range(3, 40)), [], [7], list(range(50, 130)), [], [5, 6]]


def test_dataset_is_deterministic_and_counts_empty_documents():
  before = stats.snapshot().get('t5/dropped_empty_document', 0)
  run = lambda seed: _run(sc.span_corruption(_dataset(DOCS), None, first_sentinel_id=FIRST_SENTINEL,
                                             eos_id=EOS, seed=seed))
  first = run(5)
  assert first == run(5) and first != run(6)
  assert len(first) == 4  # the two empty documents are dropped ...
  # ... and counted (two per run, three runs).
  assert stats.snapshot()['t5/dropped_empty_document'] - before == 6
  nonempty = [d for d in DOCS if d]
  for doc, ex in zip(nonempty, first):
    assert ex['inputs'][-1] == EOS and ex['targets'][-1] == EOS
    assert reconstruct(ex['inputs'][:-1], ex['targets'][:-1]) == doc


def test_lengths_fill_inputs_exactly():
  assert sc.random_spans_lengths(512) == (568, 114)  # T5's published numbers
  seq = {'inputs': 64, 'targets': 64}
  raw, targets_len = sc.random_spans_lengths(64)
  out = _run(sc.span_corruption(_dataset([list(range(3, 3 + 3 * raw))]), seq,
                                first_sentinel_id=FIRST_SENTINEL, eos_id=EOS, seed=0))
  assert len(out) == 3
  assert all(len(ex['inputs']) == 64 and len(ex['targets']) == targets_len for ex in out)


@pytest.mark.parametrize('name', sorted(sc.PAPER_VARIANTS))
def test_paper_variants_run(name):
  preprocess = sc.paper_variant(name)
  out = _run(preprocess(_dataset(DOCS), {'inputs': 32, 'targets': 32},
                        first_sentinel_id=FIRST_SENTINEL, eos_id=EOS, seed=1))
  assert out and all(len(ex['inputs']) <= 32 for ex in out)
  if sc.PAPER_VARIANTS[name]['objective'] in ('span_corruption', 'iid_replace_spans'):
    text = [t for ex in out for t in reconstruct(ex['inputs'][:-1], ex['targets'][:-1])]
    assert text == [t for d in DOCS for t in d]


def test_variant_table_covers_the_paper():
  rates = {v['noise_density'] for k, v in sc.PAPER_VARIANTS.items()
           if k.startswith('corruption_rate')}
  spans = {v['mean_noise_span_length'] for k, v in sc.PAPER_VARIANTS.items()
           if k.startswith('span_length')}
  assert rates == {0.10, 0.15, 0.25, 0.50} and spans == {2.0, 3.0, 5.0, 10.0}
  for name in ('prefix_lm', 'bert_style', 'deshuffling', 'mass_style', 'iid_replace_spans',
               'iid_drop_tokens', 'span_corruption'):
    assert name in sc.PAPER_VARIANTS


def test_errors_are_clear():
  with pytest.raises(ValueError, match='Unknown T5 objective'):
    corrupt([5, 6], (0, 0), objective='bart')
  with pytest.raises(ValueError, match='Unknown T5 paper variant'):
    sc.paper_variant('nope')
  with pytest.raises(tf.errors.InvalidArgumentError, match='sentinel ids'):
    corrupt(list(range(3, 200)), (0, 0), noise_density=0.5, mean_noise_span_length=1.0,
            num_sentinels=10)
