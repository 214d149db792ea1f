"""BART denoising (Lewis et al. 2020, sec. 2.2): noise the inputs, predict the text.

The noising functions, applied in fairseq's order (sentence permutation, token
deletion, text infilling, document rotation):

* sentence permutation - the document's sentences in a uniformly random order.
  Boundaries come from a set of sentence-final ids (e.g. the id of '.'; the end
  token stays with its sentence) or from a per-token sentence-index field.
* token deletion - each token dropped i.i.d. with `delete_ratio`.
* text infilling - span lengths are drawn from Poisson(lambda) until they cover
  ceil(mask_ratio * n) tokens (the last one trimmed); each span, zero-length
  ones included, becomes ONE mask token, so a 0-length span inserts a mask.
  Spans are placed uniformly at random without overlap (fairseq places them at
  random starts and lets overlaps merge; non-overlap keeps the count exact).
* document rotation - the document rotated to start at a random token.

The targets are always the original text; `inputs` / `targets` then go through
the encoder-decoder feature converter. All special ids are arguments.

Short documents: empty documents are dropped (counted in `stats` as
'bart/dropped_empty_document'); every other length works (a one-token
document is fully masked: ceil(0.3 * 1) = 1).
"""
import functools
from typing import Mapping, Optional, Sequence

import tensorflow as tf

from bertjax.data.preprocessors import seeding
from bertjax.data.preprocessors.span_corruption import drop_short, split_tokens


def poisson_span_lengths(num_to_mask, seed, poisson_lambda: float = 3.0) -> tf.Tensor:
  """int32[S]: Poisson span lengths (zeros allowed) summing to num_to_mask.

  Draws are taken in order until their running sum reaches num_to_mask; the
  last span is trimmed to hit it exactly (or, if all draws fall short, an
  extra span makes up the rest).
  """
  draws = tf.random.stateless_poisson([num_to_mask], seed=seed, lam=poisson_lambda,
                                      dtype=tf.int32)
  draws = tf.concat([draws, [num_to_mask]], 0)  # guarantees the sum is reached
  num_spans = tf.reduce_sum(tf.cast(tf.cumsum(draws) < num_to_mask, tf.int32)) + 1
  num_spans = tf.where(num_to_mask > 0, num_spans, 0)
  lengths = draws[:num_spans]
  last = num_to_mask - tf.reduce_sum(lengths[:-1])
  return tf.concat([lengths[:-1], tf.reshape(last, [-1])[:tf.minimum(num_spans, 1)]], 0)


def text_infilling(tokens, seed, *, mask_id: int, mask_ratio: float = 0.3,
                   poisson_lambda: float = 3.0):
  """(noised tokens, int32[S] original length behind each mask, in order)."""
  n = tf.size(tokens)
  num_to_mask = tf.cast(tf.math.ceil(tf.cast(n, tf.float32) * mask_ratio), tf.int32)
  num_to_mask = tf.minimum(num_to_mask, n)
  length_seed, place_seed = seeding.split_seed(seed, 2)
  span_lengths = poisson_span_lengths(num_to_mask, length_seed, poisson_lambda)
  num_spans = tf.size(span_lengths)
  # The output is a sequence of items: each kept token is one item, each span
  # is one (mask) item; choosing which item slots are spans places them.
  num_items = n - num_to_mask + num_spans
  is_span = seeding.shuffle(tf.range(num_items) < num_spans, place_seed)
  span_index = tf.cumsum(tf.cast(is_span, tf.int32)) - 1
  consumed = tf.where(is_span, tf.gather(span_lengths, tf.maximum(span_index, 0)), 1)
  first_token = tf.cumsum(consumed, exclusive=True)
  kept = tf.gather(tokens, tf.minimum(first_token, tf.maximum(n - 1, 0)))
  noised = tf.where(is_span, tf.cast(mask_id, tokens.dtype), kept)
  return noised, span_lengths


def sentence_ids_from_ends(tokens, sentence_end_ids: Sequence[int]) -> tf.Tensor:
  """int32[n] sentence index per token; an end token closes its sentence."""
  ends = tf.reduce_any(tf.equal(tokens[:, None], tf.constant(list(sentence_end_ids),
                                                              tokens.dtype)), axis=1)
  return tf.cumsum(tf.cast(ends, tf.int32), exclusive=True)


def permute_sentences(tokens, sentence_ids, seed) -> tf.Tensor:
  """The sentences (runs of equal non-decreasing `sentence_ids`) shuffled."""
  sentence_ids = tf.cast(sentence_ids, tf.int32)
  # Renumber to 0..k-1 so any non-decreasing labelling works.
  _, dense_ids = tf.unique(sentence_ids)
  num_sentences = tf.reduce_max(tf.concat([dense_ids, [-1]], 0)) + 1
  new_rank = tf.math.invert_permutation(seeding.shuffle(tf.range(num_sentences), seed))
  order = tf.argsort(tf.gather(new_rank, dense_ids), stable=True)
  return tf.gather(tokens, order)


def rotate_document(tokens, seed) -> tf.Tensor:
  """Rotated to start at a uniform token other than the first (n >= 2)."""
  n = tf.size(tokens)
  offset = tf.random.stateless_uniform([], seed=seed, minval=1, maxval=tf.maximum(n, 2),
                                       dtype=tf.int32)
  offset = tf.where(n >= 2, offset, 0)
  return tf.concat([tokens[offset:], tokens[:offset]], 0)


def delete_tokens(tokens, seed, delete_ratio: float) -> tf.Tensor:
  """Each token dropped independently with probability delete_ratio."""
  keep = tf.random.stateless_uniform(tf.shape(tokens), seed=seed) >= delete_ratio
  return tf.boolean_mask(tokens, keep)


def bart_denoise_example(tokens, seed, *, mask_id: int, mask_ratio: float = 0.3,
                         poisson_lambda: float = 3.0, permute: bool = True,
                         sentence_end_ids: Sequence[int] = (), sentence_ids=None,
                         delete_ratio: float = 0.0, rotate: bool = False,
                         bos_id: Optional[int] = None, eos_id: Optional[int] = None) -> dict:
  """{'inputs': noised text, 'targets': original text} for one document.

  Args:
    tokens: int[n] token ids without BOS/EOS.
    seed: [2] stateless seed.
    mask_id: the `<mask>` id.
    mask_ratio, poisson_lambda: text infilling (mask_ratio=0 turns it off).
    permute: sentence permutation; needs `sentence_end_ids` or `sentence_ids`.
    sentence_ids: optional int[n] non-decreasing sentence index per token.
    delete_ratio: token deletion probability (0 = off).
    rotate: document rotation.
    bos_id, eos_id: wrapped around inputs and targets when given.
  """
  if permute and not sentence_end_ids and sentence_ids is None:
    raise ValueError('BART sentence permutation needs sentence boundaries: pass '
                     'sentence_end_ids=[id of ".", ...] or a sentence-index field, '
                     'or permute=False.')
  tokens = tf.convert_to_tensor(tokens)
  permute_seed, delete_seed, infill_seed, rotate_seed = seeding.split_seed(seed, 4)
  noised = tokens
  if permute:
    if sentence_ids is None:
      sentence_ids = sentence_ids_from_ends(tokens, sentence_end_ids)
    noised = permute_sentences(noised, sentence_ids, permute_seed)
  if delete_ratio > 0:
    noised = delete_tokens(noised, delete_seed, delete_ratio)
  if mask_ratio > 0:
    noised, _ = text_infilling(noised, infill_seed, mask_id=mask_id, mask_ratio=mask_ratio,
                               poisson_lambda=poisson_lambda)
  if rotate:
    noised = rotate_document(noised, rotate_seed)

  def wrap(x):
    bos = [] if bos_id is None else [bos_id]
    eos = [] if eos_id is None else [eos_id]
    return tf.concat([tf.constant(bos, x.dtype), x, tf.constant(eos, x.dtype)], 0)
  return {'inputs': wrap(noised), 'targets': wrap(tokens)}


def bart_denoise(dataset: tf.data.Dataset, sequence_length: Optional[Mapping[str, int]] = None,
                 output_features=None, *, mask_id: int, seed: Optional[int] = None,
                 input_key: str = 'targets', sentence_key: Optional[str] = None,
                 **kwargs) -> tf.data.Dataset:
  """seqio preprocessor: tokenized `input_key` -> {'inputs', 'targets'}.

  With `sequence_length['targets']`, documents are split into consecutive
  chunks that fit it with BOS/EOS. Inputs are then no longer than the targets
  unless zero-length spans insert more masks than the spans remove tokens
  (rare; the feature converter trims).
  `sentence_key` names an optional per-token sentence-index feature.
  Empty documents are dropped and counted. `kwargs` go to `bart_denoise_example`.
  """
  del output_features
  dataset = drop_short(dataset, input_key, rule='bart/dropped_empty_document')
  extra_keys = () if sentence_key is None else (sentence_key,)
  if sequence_length and sequence_length.get('targets'):
    specials = sum(kwargs.get(k) is not None for k in ('bos_id', 'eos_id'))
    dataset = split_tokens(dataset, sequence_length['targets'] - specials, input_key,
                           extra_keys)
  fn = functools.partial(bart_denoise_example, mask_id=mask_id, **kwargs)

  def noise(example, seed):
    sentences = None if sentence_key is None else example[sentence_key]
    return fn(example[input_key], seed, sentence_ids=sentences)
  return seeding.map_with_seed(dataset, noise, seed)
