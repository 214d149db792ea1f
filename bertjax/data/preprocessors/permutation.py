"""XLNet permutation language modelling inputs (Yang et al. 2019).

One example is a fixed-length sequence laid out as XLNet pre-trains:

  [ctx (reuse_len) | A | SEP | B | SEP | CLS | PAD ...]
  token_type_ids:  0 for ctx, A and the first SEP; 1 for B and its SEP;
                   2 for CLS; 3 for padding (XLNet's pad segment)

A and B are cut at a random point of the text after the context. As in XLNet's
data_utils (`_split_a_and_b`), B continues A only half the time (`random_b_prob`
= 0.5, row streams): otherwise B, of the same length, is text from elsewhere (the
row stream's text ahead, from documents no row holds yet, at a random offset), so the
model sees unrelated segment pairs too. XLNet has no next-sentence loss; the label is
still emitted (`next_sentence_label`, 1 = random B) as XLNet's data_utils stores it, and
the feature converter drops it. Unlike XLNet the cut and B's start are not moved to
sentence ends. `random_b_prob=0` keeps B the text that follows A (the only choice with
independent chunks). The first `reuse_len` tokens are context only: never predicted,
visible to every token, and they see nothing after themselves, so their hidden states
can be cached as memory for the next segment (XLNet's recurrence).

Prediction targets (partial prediction, sec. 2.3 and the span-based variant):
spans of n ~ p(n) ∝ 1/n tokens (n <= max_span_length) are sampled left to
right, one per block of n + n * mask_alpha / mask_beta tokens (so about
mask_beta / (mask_alpha + mask_beta) = 1/7 of A and B with XLNet's alpha=6,
beta=1); the span that passes `num_predict` is trimmed and random single tokens
top the count up to exactly `num_predict`, as XLNet's data_utils does.
Only A/B tokens are targets, and at most all but one of them, so every query
attends to something.

Factorization order: the targets and the functional tokens (SEP, CLS) get a
random order ('token': XLNet's uniform order; 'span': each span's tokens are
consecutive in the order, spans in random order). Every other token comes
first: it is seen by all and sees no permuted token.

Output features (per example, shown padded to L; the seqio preprocessor emits
them unpadded and XLNetFeatureConverter pads them to exactly these values):
  input_ids       int32   [L]    original ids (XLNet's content stream input)
  token_type_ids  int32   [L]
  attention_mask  int32   [L]    1 = real token
  perm_mask       float32 [L, L] 1 = i may NOT attend to j (HF convention); a
                                 target's own diagonal entry is 1 (its query
                                 stream must not see it); the model clears the
                                 diagonal for the content stream
  target_mapping  float32 [P, L] one-hot rows for the targets in position
                                 order, zero rows after them
  target_ids      int32   [P]    the id to predict per row (0 in padding rows)
  target_weights  float32 [P]    1.0 for real rows
  input_q         float32 [L]    1.0 at targets (the query-stream marker)
  next_sentence_label int32 []   1 = B is text from elsewhere, 0 = B follows A

Where the L - 3 tokens come from (`xlnet_plm`):
  streams (batch_size given; XLNet's pretraining): the documents are laid out as
    `batch_size` continuous row streams (`streams.row_streams`, documents joined
    by [SEP]) and row r of step t is stream_r[t * reuse_len : t * reuse_len + L - 3]
    (with B, half the time, replaced by text from the documents ahead: the context
    and A are always the stream's own text).
    So the context of step t+1 is the text right after the context of step t,
    whose hidden states the model keeps as memory: with the memory carried between
    train steps (`PermutationLM.carry_memory`), every row reads one continuous
    text. Examples come in batch order and must be batched by `batch_size`
    without shuffling (`bertjax.data.recipes.registry` does so for row-stream recipes).
  chunks (batch_size None): each document is split into chunks of L - 3 tokens,
    independent examples; chunks with fewer than reuse_len + 2 tokens (A and B
    need one each) are dropped, shorter ones right-padded.
Empty documents are dropped and counted in `stats` as
'xlnet/dropped_short_document' (so are short chunks).
"""
import functools
from typing import Mapping, Optional

import numpy as np
import tensorflow as tf

from bertjax.data.preprocessors import seeding
from bertjax.data.preprocessors import streams
from bertjax.data.preprocessors.span_corruption import drop_short, split_tokens

PAD_SEGMENT = 3
ORDERS = ('token', 'span')
_OTHER = 'other_text'  # the row streams' text ahead, where a random B comes from


def sample_spans(region_length: int, seed, *, mask_alpha: int = 6, mask_beta: int = 1,
                 max_span_length: int = 5) -> tf.Tensor:
  """int32[region_length]: 0 off-span, k >= 1 inside the k-th sampled span."""
  block_min = 1 + mask_alpha // mask_beta
  max_spans = -(-region_length // block_min)
  length_seed, offset_seed = seeding.split_seed(seed, 2)
  logits = tf.math.log(1.0 / np.arange(1, max_span_length + 1, dtype=np.float32))
  span_len = 1 + tf.random.stateless_categorical(logits[None], max_spans, length_seed,
                                                 dtype=tf.int32)[0]
  context = (span_len * mask_alpha) // mask_beta
  # Span k sits at a uniform offset in [0, context) of its block of
  # span_len + context tokens; blocks tile the region from the left.
  block_start = tf.cumsum(span_len + context, exclusive=True)
  offset = tf.cast(tf.random.stateless_uniform([max_spans], offset_seed) *
                   tf.cast(context, tf.float32), tf.int32)
  start = tf.minimum(block_start + offset, region_length)
  end = tf.minimum(start + span_len, region_length)
  # +k at each span's start and -k at its end; spans are disjoint and ordered.
  span_id = tf.range(1, max_spans + 1)
  edges = (tf.math.unsorted_segment_sum(span_id, start, region_length + 1) -
           tf.math.unsorted_segment_sum(span_id, end, region_length + 1))
  return tf.cumsum(edges)[:region_length]


def _rank(keys) -> tf.Tensor:
  """Distinct int32 ranks 0..n-1 of `keys` (ties broken by position)."""
  return tf.math.invert_permutation(tf.argsort(keys, stable=True))


def xlnet_example(tokens, seed, *, seq_len: int, num_predict: int, sep_id: int, cls_id: int,
                  pad_id: int = 0, reuse_len: int = 0, mask_alpha: int = 6, mask_beta: int = 1,
                  max_span_length: int = 5, order: str = 'token', pad: bool = True,
                  other=None, random_b_prob: float = 0.0) -> dict:
  """The XLNet features (module docstring) for one chunk of <= seq_len - 3 tokens.

  The chunk must hold at least reuse_len + 2 tokens (the dataset wrapper
  drops shorter ones). With `pad=False` the [L] / [L, L] features stop at the
  last real token (CLS), as `XLNetFeatureConverter` expects: it pads them back
  to exactly the `pad=True` values. With probability `random_b_prob` segment B is
  a random slice of `other` (>= seq_len - 3 tokens of text from elsewhere) instead
  of the text after A.
  """
  _check_args(seq_len, num_predict, reuse_len, order)
  L, R, P = seq_len, reuse_len, num_predict
  tokens = tf.cast(tokens, tf.int32)[:L - 3]
  n = tf.size(tokens)
  tf.debugging.assert_greater_equal(n, R + 2, message='XLNet chunk shorter than reuse_len + 2')
  cut_seed, span_seed, fill_seed, order_seed, tie_seed = seeding.split_seed(seed, 5)
  cut = R + tf.random.stateless_uniform([], cut_seed, minval=1, maxval=n - R, dtype=tf.int32)
  random_b = tf.constant(False)
  if random_b_prob > 0:
    tokens, random_b = _maybe_random_b(tokens, cut, other, random_b_prob, seed)
  # Positions: A = [0, cut) (context first), SEP = cut, B = (cut, n], SEP = n + 1,
  # CLS = n + 2, padding after.
  input_ids = tf.concat([tokens[:cut], [sep_id], tokens[cut:], [sep_id, cls_id],
                         tf.fill([L - n - 3], pad_id)], 0)
  pos = tf.range(L)
  token_type_ids = tf.where(pos <= cut, 0, tf.where(pos <= n + 1, 1, 2))
  token_type_ids = tf.where(pos > n + 2, PAD_SEGMENT, token_type_ids)
  real = pos <= n + 2
  reuse = pos < R
  functional = (pos == cut) | (pos == n + 1) | (pos == n + 2)
  content = real & ~reuse & ~functional

  # Targets: sampled spans over the non-context region, trimmed to the budget,
  # topped up with random single tokens.
  budget = tf.minimum(P, tf.reduce_sum(tf.cast(content, tf.int32)) - 1)
  spans = tf.concat([tf.zeros([R], tf.int32),
                     sample_spans(L - R, span_seed, mask_alpha=mask_alpha, mask_beta=mask_beta,
                                  max_span_length=max_span_length)], 0)
  in_span = (spans > 0) & content
  is_target = in_span & (tf.cumsum(tf.cast(in_span, tf.int32)) <= budget)
  shortfall = budget - tf.reduce_sum(tf.cast(is_target, tf.int32))
  candidate = content & ~is_target
  score = tf.where(candidate, tf.random.stateless_uniform([L], fill_seed), -1.0)
  fill = (_rank(-score) < shortfall) & candidate
  is_target |= fill

  # Factorization order over the permuted set (targets + functional tokens).
  permuted = is_target | functional
  if order == 'span':
    # Tokens of one span share a unit; every other permuted token is its own.
    unit = tf.where(is_target & ~fill, spans, L + pos)
    unit_rank = tf.gather(_rank(tf.random.stateless_uniform([2 * L], order_seed)), unit)
    tie = _rank(tf.random.stateless_uniform([L], tie_seed))
    key = unit_rank * L + tie
  else:
    key = _rank(tf.random.stateless_uniform([L], order_seed))
  rank = tf.where(permuted, _rank(tf.where(permuted, key, -1)), -1)
  # XLNet: a target cannot see itself, any other token can (rank + 1).
  self_rank = tf.where(is_target, rank, rank + 1)
  blocked = permuted[None, :] & (self_rank[:, None] <= rank[None, :])
  blocked |= reuse[:, None] & ~reuse[None, :]  # context never sees what follows
  blocked |= ~real[None, :] | ~real[:, None]  # padding neither sees nor is seen
  features = _target_features(input_ids, token_type_ids, real, blocked, is_target, P, L)
  # As batch.py's NSP label (XLNet's data_utils stores the opposite, 1 = B follows A).
  label = {'next_sentence_label': tf.cast(random_b, tf.int32)}
  if pad:
    return {**features, **label}
  m = n + 3
  trimmed = {k: v[:m] for k, v in features.items() if v.shape[0] == L}
  trimmed['perm_mask'] = features['perm_mask'][:m, :m]
  trimmed['target_mapping'] = features['target_mapping'][:, :m]
  return {**features, **trimmed, **label}


def _maybe_random_b(tokens, cut, other, random_b_prob: float, seed):
  """(`tokens` with B = tokens[cut:] replaced, with probability `random_b_prob`, by as many
  tokens of `other` from a random offset; whether it was)."""
  if other is None:
    raise ValueError(f'random_b_prob={random_b_prob} needs `other` text to draw B from.')
  other = tf.cast(other, tf.int32)
  # Seeds of their own, so every other draw is the same as with B continuing A.
  pick_seed, offset_seed = seeding.split_seed(tf.random.experimental.stateless_fold_in(
      tf.cast(seed, tf.int64), 1), 2)
  b_len = tf.size(tokens) - cut
  tf.debugging.assert_less_equal(b_len, tf.size(other), message='XLNet: other text too short')
  offset = tf.random.stateless_uniform([], offset_seed, minval=0,
                                       maxval=tf.size(other) - b_len + 1, dtype=tf.int32)
  random_b = tf.random.stateless_uniform([], pick_seed) < random_b_prob
  b = tf.where(random_b, other[offset:offset + b_len], tokens[cut:])
  return tf.concat([tokens[:cut], b], 0), random_b


def _target_features(input_ids, token_type_ids, real, blocked, is_target, P, L) -> dict:
  target_pos = tf.boolean_mask(tf.range(L), is_target)
  count = tf.size(target_pos)
  target_pos = tf.pad(target_pos, [[0, P - count]], constant_values=-1)
  weights = tf.cast(tf.range(P) < count, tf.float32)
  features = {
      'input_ids': input_ids,
      'token_type_ids': tf.cast(token_type_ids, tf.int32),
      'attention_mask': tf.cast(real, tf.int32),
      'perm_mask': tf.cast(blocked, tf.float32),
      'target_mapping': tf.one_hot(target_pos, L, dtype=tf.float32),  # -1 -> zero row
      'target_ids': tf.gather(input_ids, tf.maximum(target_pos, 0)) * tf.cast(weights, tf.int32),
      'target_weights': weights,
      'input_q': tf.cast(is_target, tf.float32),
  }
  # Static shapes, so batches have fixed shapes for XLA.
  shapes = {'perm_mask': [L, L], 'target_mapping': [P, L], 'target_ids': [P],
            'target_weights': [P]}
  return {k: tf.reshape(v, shapes.get(k, [L])) for k, v in features.items()}


def _check_args(seq_len, num_predict, reuse_len, order):
  if order not in ORDERS:
    raise ValueError(f'Unknown XLNet factorization order {order!r}; expected one of {ORDERS}.')
  if not 0 <= reuse_len <= seq_len - 5:
    raise ValueError(f'reuse_len={reuse_len} must be in [0, seq_len - 5 = {seq_len - 5}] '
                     '(A, B, two SEPs and CLS need 5 positions).')
  if not 1 <= num_predict <= seq_len - reuse_len - 4:
    raise ValueError(f'num_predict={num_predict} must be in [1, seq_len - reuse_len - 4 = '
                     f'{seq_len - reuse_len - 4}].')


def xlnet_plm(dataset: tf.data.Dataset, sequence_length: Mapping[str, int],
              output_features=None, *, sep_id: int, cls_id: int,
              num_predict: Optional[int] = None, batch_size: Optional[int] = None,
              reuse_len: Optional[int] = None, random_b_prob: Optional[float] = None,
              seed: Optional[int] = None, input_key: str = 'targets',
              **kwargs) -> tf.data.Dataset:
  """seqio preprocessor: tokenized `input_key` -> XLNet features for sequences
  of `sequence_length['input_ids']` tokens (module docstring).

  batch_size: lay the documents out as this many row streams (XLNet's
    pretraining data, for memory carried between steps); None: independent chunks.
  reuse_len: the context length; None: half the sequence (XLNet: 256 of 512) with
    row streams, 0 with chunks.
  random_b_prob: how often B is text from elsewhere rather than A's continuation;
    None: XLNet's 0.5 with row streams, 0 with chunks (which have no text ahead).
  num_predict: defaults to `sequence_length['target_ids']`.
  `kwargs` go to `xlnet_example`; by default the features are unpadded (`pad=False`)
  for `XLNetFeatureConverter`.
  """
  del output_features
  seq_len = sequence_length['input_ids']
  if num_predict is None:
    if 'target_ids' not in sequence_length:
      raise ValueError("xlnet_plm needs num_predict or sequence_length['target_ids'].")
    num_predict = sequence_length['target_ids']
  if reuse_len is None:
    reuse_len = 0 if batch_size is None else seq_len // 2
  if random_b_prob is None:
    random_b_prob = 0.0 if batch_size is None else 0.5
  if not 0 <= random_b_prob <= 1:
    raise ValueError(f'random_b_prob={random_b_prob}; expected a probability in [0, 1].')
  if random_b_prob and batch_size is None:
    raise ValueError(f'random_b_prob={random_b_prob} draws B from the row streams\' text '
                     'ahead; independent chunks (batch_size=None) need random_b_prob=0.')
  kwargs.setdefault('pad', False)
  _check_args(seq_len, num_predict, reuse_len, kwargs.get('order', 'token'))
  rule = 'xlnet/dropped_short_document'
  dataset = drop_short(dataset, input_key, rule)  # empty documents make no chunk
  if batch_size is None:
    dataset = split_tokens(dataset, seq_len - 3, input_key)
    dataset = drop_short(dataset, input_key, rule, min_tokens=reuse_len + 2)
  else:
    if reuse_len < 1:
      raise ValueError(f'XLNet row streams advance by reuse_len tokens per step; got '
                       f'reuse_len={reuse_len} (use >= 1, e.g. {seq_len // 2}).')
    dataset = streams.row_streams(dataset, batch_size=batch_size, window=seq_len - 3,
                                  stride=reuse_len, separator_id=sep_id, key=input_key,
                                  other_key=_OTHER if random_b_prob else None)
  fn = functools.partial(xlnet_example, seq_len=seq_len, num_predict=num_predict,
                         sep_id=sep_id, cls_id=cls_id, reuse_len=reuse_len,
                         random_b_prob=random_b_prob, **kwargs)
  return seeding.map_with_seed(
      dataset, lambda ex, seed: fn(ex[input_key], seed, other=ex.get(_OTHER)), seed)
