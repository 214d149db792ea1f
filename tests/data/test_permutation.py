"""XLNet permutation-LM features: layout, targets and the factorization order."""
from hypothesis import given, settings, strategies as st
import numpy as np
import pytest
import tensorflow as tf

from bertjax.data import feature_converters as fc
from bertjax.data.preprocessors import permutation as pm
from bertjax.data.preprocessors import seeding
from bertjax.data.preprocessors import stats
from bertjax.data.preprocessors import streams

CLS, SEP, PAD = 3, 4, 5
SEEDS = st.tuples(st.integers(0, 2**31 - 1), st.integers(0, 2**31 - 1))
FAST = settings(max_examples=25, deadline=None)


def make(doc, seed, **kwargs):
  out = pm.xlnet_example(tf.constant(doc, tf.int32), tf.constant(seed, tf.int64),
                         sep_id=SEP, cls_id=CLS, pad_id=PAD, **kwargs)
  return {k: v.numpy() for k, v in out.items()}


def implied_order(perm_mask, permuted):
  """The permuted positions sorted by how many of them each one sees; checks
  that this is a strict total order (position k sees exactly the first k)."""
  q = np.flatnonzero(permuted)
  sees = perm_mask[np.ix_(q, q)] == 0
  np.fill_diagonal(sees, False)
  order = q[np.argsort(sees.sum(1), kind='stable')]
  for k, i in enumerate(order):
    assert set(q[sees[np.searchsorted(q, i)]]) == set(order[:k]), 'not a total order'
  return list(order)


def check_example(out, doc, seq_len, reuse_len, num_predict, cls=CLS, sep=SEP, pad=PAD):
  L, R, P = seq_len, reuse_len, num_predict
  doc = doc[:L - 3]
  n = len(doc)
  ids, types, real = out['input_ids'], out['token_type_ids'], out['attention_mask'] == 1
  perm, q = out['perm_mask'], out['input_q'] == 1
  # Layout: [ctx | A | SEP | B | SEP | CLS | PAD...] with XLNet's segment ids.
  assert real.sum() == n + 3 and not real[n + 3:].any()
  cut = np.flatnonzero(types == 0)[-1]  # (the text itself may hold [SEP]s)
  assert ids[cut] == sep and ids[n + 1] == sep and ids[n + 2] == cls
  assert (ids[n + 3:] == pad).all()
  assert R + 1 <= cut <= n - 1
  assert list(ids[:cut]) + list(ids[cut + 1:n + 1]) == list(doc)
  assert (types[:cut + 1] == 0).all() and (types[cut + 1:n + 2] == 1).all()
  assert types[n + 2] == 2 and (types[n + 3:] == pm.PAD_SEGMENT).all()
  # Targets: only A/B tokens, exactly num_predict of them (all but one at most).
  reuse = np.arange(L) < R
  functional = np.isin(np.arange(L), [cut, n + 1, n + 2])
  content = real & ~reuse & ~functional
  targets = np.flatnonzero(q)
  assert content[targets].all()
  count = min(P, content.sum() - 1)
  assert len(targets) == count
  mapping = out['target_mapping']
  assert (mapping[:count].argmax(1) == targets).all() and (mapping.sum(1) == (np.arange(P) < count)).all()
  assert (out['target_ids'][:count] == ids[targets]).all() and (out['target_ids'][count:] == 0).all()
  assert (out['target_weights'] == (np.arange(P) < count)).all()
  # Visibility, as XLNet specifies.
  permuted = q | functional
  others = real & ~permuted
  assert (perm[targets, targets] == 1).all()                 # a query never sees itself
  assert (np.diag(perm)[real & ~q] == 0).all()               # content stream sees itself
  assert (perm[np.ix_(real & ~reuse, others)] == 0).all()    # non-targets are seen by all
  assert (perm[np.ix_(real, reuse)] == 0).all()              # ... the context too
  assert (perm[np.ix_(others, permuted)] == 1).all()         # and they see no permuted token
  assert (perm[np.ix_(reuse, ~reuse)] == 1).all()            # context sees nothing after it
  assert (perm[:, ~real] == 1).all() and (perm[~real] == 1).all()  # padding: no attention
  return implied_order(perm, permuted)


@FAST
@given(st.integers(2, 61), st.integers(0, 8), st.integers(1, 12), SEEDS,
       st.sampled_from(pm.ORDERS))
def test_features_encode_a_valid_order(n, reuse_len, num_predict, seed, order):
  L = 64
  n = max(n, reuse_len + 2)
  doc = list(range(10, 10 + n))
  num_predict = min(num_predict, L - reuse_len - 4)
  out = make(doc, seed, seq_len=L, num_predict=num_predict, reuse_len=reuse_len, order=order)
  check_example(out, doc, L, reuse_len, num_predict)
  assert all(out[k].shape == s for k, s in [('perm_mask', (L, L)), ('target_mapping', (num_predict, L)),
                                           ('target_ids', (num_predict,)), ('input_ids', (L,))])


@pytest.mark.parametrize('seed', [(0, 1), (5, 9), (12, 3)])
def test_span_order_keeps_each_span_together(seed):
  L, R = 96, 8
  doc = list(range(10, 10 + L - 3))
  out = make(doc, seed, seq_len=L, num_predict=20, reuse_len=R, order='span')
  functional = np.isin(out['input_ids'], [SEP, CLS])
  order = check_example(out, doc, L, R, 20)
  spans = np.concatenate([np.zeros(R, int), pm.sample_spans(
      L - R, seeding.split_seed(tf.constant(seed, tf.int64), 5)[1]).numpy()])
  q = out['input_q'] == 1
  slot = {p: k for k, p in enumerate(order)}
  for span in set(spans[q & ~functional]) - {0}:
    members = np.flatnonzero(q & (spans == span))
    ranks = sorted(slot[p] for p in members)
    assert ranks == list(range(ranks[0], ranks[0] + len(ranks)))


def test_span_sampling_density():
  """One span of n ~ 1/n per block of 7n tokens: ~1/7 of the region."""
  spans = pm.sample_spans(70000, tf.constant([1, 2], tf.int64)).numpy()
  assert abs((spans > 0).mean() - 1 / 7) < 0.01
  lengths = np.bincount(spans)[1:]
  lengths = lengths[lengths > 0]
  assert lengths.max() <= 5
  harmonic = 1 / np.arange(1, 6) / (1 / np.arange(1, 6)).sum()
  assert abs(lengths.mean() - (np.arange(1, 6) * harmonic).sum()) < 0.1


@pytest.mark.slow  # imports torch + transformers
def test_query_stream_does_not_leak_through_a_real_xlnet():
  """The HF reference model with our perm_mask: a target's prediction ignores
  its own token and every token after it in the order, but not earlier ones."""
  torch = pytest.importorskip('torch')
  transformers = pytest.importorskip('transformers')
  torch.manual_seed(0)
  config = transformers.XLNetConfig(vocab_size=64, d_model=16, n_layer=2, n_head=2, d_inner=32)
  model = transformers.XLNetLMHeadModel(config).eval()
  L, P = 24, 5
  doc = list(range(10, 10 + 18))
  out = make(doc, (2, 3), seq_len=L, num_predict=P, reuse_len=4)
  permuted = (out['input_q'] == 1) | np.isin(out['input_ids'], [SEP, CLS])
  order = implied_order(out['perm_mask'], permuted)

  def logits(ids):
    with torch.no_grad():
      return model(input_ids=torch.tensor(ids[None]),
                   token_type_ids=torch.tensor(out['token_type_ids'][None]),
                   attention_mask=torch.tensor(out['attention_mask'][None]),
                   perm_mask=torch.tensor(out['perm_mask'][None]),
                   target_mapping=torch.tensor(out['target_mapping'][None])).logits[0].numpy()

  base = logits(out['input_ids'])
  for row, t in enumerate(np.flatnonzero(out['input_q'])):
    later = order[order.index(t):]  # t itself and everything predicted after it
    changed = out['input_ids'].copy()
    changed[later] = 63
    np.testing.assert_allclose(logits(changed)[row], base[row], atol=1e-5)
  # An always-visible A/B token (not permuted, not context) does matter.
  visible = np.flatnonzero(~permuted & (out['attention_mask'] == 1) & (np.arange(L) >= 4))[0]
  changed = out['input_ids'].copy()
  changed[visible] = 63
  assert np.abs(logits(changed) - base).max() > 1e-4


def test_random_b_is_a_slice_of_the_other_text_half_the_time():
  """random_b_prob=0.5: B is, for about half the seeds, as many tokens of `other` as the
  text after A, from a random offset; everything else is drawn as with B continuing A."""
  L, R, P = 40, 6, 5
  doc, other = list(range(10, 10 + L - 3)), list(range(200, 200 + L - 3))
  seeds = tf.data.Dataset.range(300).map(lambda i: tf.stack([i, 7 * i]))
  draw = lambda **kw: list(seeds.map(lambda seed: pm.xlnet_example(
      doc, seed, seq_len=L, num_predict=P, sep_id=SEP, cls_id=CLS, pad_id=PAD, reuse_len=R,
      **kw)).as_numpy_iterator())
  random_b = 0
  for plain, paired in zip(draw(), draw(other=other, random_b_prob=0.5)):
    for k in ('token_type_ids', 'perm_mask', 'target_mapping', 'target_weights', 'input_q'):
      np.testing.assert_array_equal(plain[k], paired[k], err_msg=k)
    cut = np.flatnonzero(paired['token_type_ids'] == 0)[-1]
    a, b = paired['input_ids'][:cut].tolist(), paired['input_ids'][cut + 1:L - 2].tolist()
    assert a == doc[:cut] and plain['next_sentence_label'] == 0
    assert paired['next_sentence_label'] == (b != doc[cut:])  # 1 = random B
    if paired['next_sentence_label']:
      random_b += 1
      assert b[0] >= 200 and b == list(range(b[0], b[0] + len(b)))  # a slice of other
    check_example(paired, a + b, L, R, P)
  assert 0.4 < random_b / 300 < 0.6, random_b


@pytest.mark.parametrize('rows,seed', [(1, 3), (3, 8)])
def test_stream_pairs_label_random_b_which_is_never_the_true_continuation(rows, seed):
  """Over row streams, per example: the label says whether B is A's continuation (the
  rest of the row's window) or text from elsewhere; a random B is never the true
  continuation, nor any text a row of that step holds; about half the pairs are random."""
  L, R = 24, 8
  lengths = np.random.default_rng(seed).integers(1, 30, size=40)
  # Token 1000 d + j: the j-th token of document d, so each token names its document.
  docs = [[1000 * d + j for j in range(n)] for d, n in enumerate(lengths, 1)]
  joined = [t for doc in docs for t in doc + [SEP]]
  windows = [w.tolist() for step in streams.stream_windows(iter(docs), rows, L - 3, R, SEP)
             for w in step]
  ds = tf.data.Dataset.from_tensor_slices({'targets': tf.ragged.constant(docs, tf.int32)})
  examples = _run(pm.xlnet_plm(ds, {'input_ids': L}, num_predict=3, sep_id=SEP, cls_id=CLS,
                               pad_id=PAD, batch_size=rows, reuse_len=R, seed=seed,
                               pad=True))
  # The text ahead (rows * (L - 3) tokens past the rows' last, partly read, document)
  # runs out a few steps before the windows do.
  assert len(windows) - 8 * rows <= len(examples) <= len(windows)
  labels = []
  for i, (ex, window) in enumerate(zip(examples, windows)):
    ids, types = np.asarray(ex['input_ids']), np.asarray(ex['token_type_ids'])
    a, b = ids[types == 0][:-1].tolist(), ids[types == 1][:-1].tolist()
    true_b = window[len(a):]
    assert a == window[:len(a)] and len(b) == len(true_b)
    labels.append(ex['next_sentence_label'])
    assert labels[-1] == (b != true_b)
    if labels[-1]:
      step = windows[i - i % rows:i - i % rows + rows]
      held = {t // 1000 for w in step for t in w if t != SEP}
      assert not {t // 1000 for t in b if t != SEP} & held
      assert any(joined[k:k + len(b)] == b for k in range(len(joined)))
  # Binomial(n, 1/2), n ~ 50: within 4 standard deviations of n / 2.
  n = len(labels)
  assert n >= 40 and abs(sum(labels) - n / 2) <= 2 * np.sqrt(n), (sum(labels), n)


def test_random_b_needs_text_to_draw_from():
  with pytest.raises(ValueError, match='other'):
    make(list(range(10, 40)), (0, 0), seq_len=32, num_predict=2, random_b_prob=0.5)
  ds = tf.data.Dataset.from_tensor_slices({'targets': tf.ragged.constant([[11] * 40])})
  with pytest.raises(ValueError, match='random_b_prob=0'):
    pm.xlnet_plm(ds, {'input_ids': 32}, num_predict=4, sep_id=SEP, cls_id=CLS,
                 random_b_prob=0.5)


def _run(dataset):
  return [{k: v.tolist() for k, v in ex.items()} for ex in dataset.as_numpy_iterator()]


def test_dataset_determinism_chunks_and_short_documents():
  docs = [list(range(10, 80)), [], [11, 12, 13], list(range(100, 106)), [7]]
  ds = tf.data.Dataset.from_tensor_slices({'targets': tf.ragged.constant(docs, tf.int32)})
  before = stats.snapshot().get('xlnet/dropped_short_document', 0)
  plm = lambda seed, **kw: pm.xlnet_plm(ds, {'input_ids': 32}, num_predict=4, sep_id=SEP,
                                        cls_id=CLS, pad_id=PAD, reuse_len=3, seed=seed, **kw)
  first = _run(plm(1))
  assert first == _run(plm(1)) and first != _run(plm(2))
  # 70 tokens -> chunks 29 + 29 + 12; [11,12,13] (< reuse_len + 2), [] and [7]
  # are dropped and counted; the 6-token document is kept.
  assert len(first) == 4
  assert stats.snapshot()['xlnet/dropped_short_document'] - before == 3 * 3  # 3 runs
  # Unpadded for the feature converter, which pads to the padded features.
  converter = fc.XLNetFeatureConverter(pad_id=PAD)
  converted = _run(converter(plm(1), converter.task_lengths(32, num_predict=4)))
  padded = _run(plm(1, pad=True))
  assert len(first[-1]['input_ids']) == 9 and len(padded[-1]['input_ids']) == 32
  for got, want in zip(converted, padded):
    for k in converter.MODEL_FEATURES:
      np.testing.assert_array_equal(got[k], want[k], err_msg=k)
  spec = plm(0, pad=True).element_spec  # static shapes, so batches are fixed-size
  assert spec['perm_mask'].shape == (32, 32) and spec['target_mapping'].shape == (4, 32)
  assert spec['input_ids'].shape == (32,) and spec['target_ids'].shape == (4,)


def test_argument_errors():
  with pytest.raises(ValueError, match='reuse_len'):
    make(list(range(10, 20)), (0, 0), seq_len=16, num_predict=2, reuse_len=12)
  with pytest.raises(ValueError, match='num_predict'):
    make(list(range(10, 20)), (0, 0), seq_len=16, num_predict=13)
  with pytest.raises(ValueError, match='order'):
    make(list(range(10, 20)), (0, 0), seq_len=16, num_predict=2, order='random')
