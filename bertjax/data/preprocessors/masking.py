"""BERT masked-language-model masking (token and whole-word), static or dynamic.

Input examples carry `input_ids` (a 1-D int32 sequence that already holds its
special tokens, e.g. [CLS] A [SEP] B [SEP]); `mlm_mask` replaces them with the
corrupted ids and adds the contract features
  mlm_targets  int32 [L]: the original id where a token was selected, else 0,
  mlm_weights  float32 [L]: 1.0 where selected.

Selection (Devlin et al. 2019, sec. 3.1 and create_pretraining_data.py):
  * only "eligible" tokens can be selected: every id not in `special_ids`
    (pass [CLS], [SEP], [PAD], [MASK], ...), so specials and padding never are;
  * the budget is `rate` x (number of eligible tokens), rounded stochastically
    (floor(rate * n + u), u ~ U[0, 1)) so the expected rate is exactly `rate`,
    and capped at `max_predictions` if given;
  * words are visited in a random order and taken while the running token count
    stays within the budget; a word that straddles the budget is taken iff at
    least half of it fits (i.e. the budget is rounded to the nearest word
    boundary), so whole-word masking keeps the expected rate;
  * each selected token becomes [MASK] with prob. 0.8, a random non-special id
    with prob. 0.1 and stays unchanged with prob. 0.1 (decided per token).

Whole-word masking groups a token with the continuation tokens that follow it,
using a boolean "is continuation" table over the vocabulary
(`continuation_table`): WordPiece marks continuations with a '##' prefix,
SentencePiece marks word *starts* with '▁'. Without a table every token is its
own word (original BERT).

Static vs dynamic masking (RoBERTa, Liu et al. 2019, Table 1): masking is a pure
function of (example, seed). Put `mlm_mask` before the Task's
`seqio.CacheDatasetPlaceholder` (it runs before `repeat`, so every epoch sees
the same masks) and duplicate the data `dupe_factor` times first
(`duplicate_examples`) for BERT's static masking; put it after the placeholder
(it then runs after `repeat` and draws fresh seeds every epoch) for dynamic
masking.
"""
from typing import Optional, Sequence

import numpy as np
import tensorflow as tf

from bertjax.data.preprocessors import seeding

WORDPIECE = "wordpiece"
SENTENCEPIECE = "sentencepiece"
BYTELEVEL = "bytelevel"


def continuation_table(pieces: Sequence[str], style: str,
                       special_pieces: Sequence[str] = ()) -> np.ndarray:
  """Boolean [vocab_size] table: True where a piece continues the previous word.

  Args:
    pieces: the vocabulary's pieces in id order.
    style: 'wordpiece' ('##' prefix = continuation), 'sentencepiece' ('▁'
      prefix = word start; anything else continues a word) or 'bytelevel'
      (GPT-2 / RoBERTa BPE: 'Ġ' prefix = word start).
    special_pieces: pieces that are never continuations (e.g. '[CLS]', '<unk>').
  """
  special = set(special_pieces)
  if style == WORDPIECE:
    cont = [p.startswith("##") and p not in special for p in pieces]
  elif style in (SENTENCEPIECE, BYTELEVEL):
    start = "\u2581" if style == SENTENCEPIECE else "\u0120"
    # Control/special pieces like '<pad>' or '[CLS]' have no prefix but start words.
    cont = [not p.startswith(start) and p not in special
            and not (p.startswith("<") and p.endswith(">"))
            and not (p.startswith("[") and p.endswith("]")) for p in pieces]
  else:
    raise ValueError(f"Unknown continuation style {style!r}; expected "
                     f"{WORDPIECE!r}, {SENTENCEPIECE!r} or {BYTELEVEL!r}.")
  return np.asarray(cont, dtype=bool)


def is_special(ids: tf.Tensor, special_ids: Sequence[int]) -> tf.Tensor:
  """Boolean mask of `ids` that are in `special_ids`."""
  special = tf.constant(list(special_ids) or [-1], dtype=ids.dtype)
  return tf.reduce_any(tf.equal(ids[..., None], special), axis=-1)


def word_ids(ids: tf.Tensor, special_ids: Sequence[int],
             is_continuation: Optional[np.ndarray] = None):
  """Groups eligible tokens into words.

  Returns (eligible [L] bool, word_id [L] int32 with -1 for ineligible tokens,
  num_words scalar). A continuation token right after an ineligible one starts a
  new word (a truncated word still forms a unit).
  """
  eligible = tf.logical_not(is_special(ids, special_ids))
  if is_continuation is None:
    cont = tf.zeros_like(eligible)
  else:
    cont = tf.gather(tf.convert_to_tensor(is_continuation, tf.bool), ids)
  prev_eligible = tf.concat([[False], eligible[:-1]], axis=0)
  starts = eligible & (tf.logical_not(cont) | tf.logical_not(prev_eligible))
  wid = tf.cumsum(tf.cast(starts, tf.int32)) - 1
  wid = tf.where(eligible, wid, -1)
  return eligible, wid, tf.reduce_sum(tf.cast(starts, tf.int32))


def budget(num_eligible: tf.Tensor, rate: float, seed: tf.Tensor,
           max_predictions: Optional[int] = None) -> tf.Tensor:
  """floor(rate * n + u): an integer budget whose expectation is rate * n."""
  u = tf.random.stateless_uniform([], seed=seed)
  n = tf.cast(tf.floor(rate * tf.cast(num_eligible, tf.float32) + u), tf.int32)
  if max_predictions is not None:
    n = tf.minimum(n, max_predictions)
  return n


def select_words(ids: tf.Tensor, rate: float, seed: tf.Tensor,
                 special_ids: Sequence[int],
                 is_continuation: Optional[np.ndarray] = None,
                 max_predictions: Optional[int] = None) -> tf.Tensor:
  """Boolean [L] mask of the tokens selected for prediction (whole words)."""
  budget_seed, order_seed = seeding.split_seed(seed, 2)
  eligible, wid, num_words = word_ids(ids, special_ids, is_continuation)
  # Ineligible tokens have word id -1, which unsorted_segment_sum drops.
  word_len = tf.math.unsorted_segment_sum(tf.ones_like(wid), wid, num_words)
  target = budget(tf.reduce_sum(word_len), rate, budget_seed, max_predictions)
  order = tf.argsort(tf.random.stateless_uniform([num_words], seed=order_seed))
  lengths = tf.gather(word_len, order)
  ends = tf.cumsum(lengths)
  # Take a word iff its midpoint falls within the budget (see module doc).
  take = tf.cast(2 * ends - lengths, tf.float32) <= 2.0 * tf.cast(target, tf.float32)
  word_selected = tf.scatter_nd(order[:, None], take, [num_words])
  return gather_words(word_selected, wid)


def gather_words(word_values: tf.Tensor, wid: tf.Tensor) -> tf.Tensor:
  """Per-token view of a per-word tensor; tokens with word id -1 get zero/False."""
  padded = tf.concat([word_values, tf.zeros([1], word_values.dtype)], axis=0)
  return tf.gather(padded, tf.where(wid >= 0, wid, tf.size(word_values)))


def replacement_ids(vocab_size: int, special_ids: Sequence[int]) -> np.ndarray:
  """The ids a selected token may be replaced with at random (non-special)."""
  keep = np.ones([vocab_size], bool)
  keep[[i for i in special_ids if 0 <= i < vocab_size]] = False
  return np.nonzero(keep)[0].astype(np.int32)


def corrupt(ids: tf.Tensor, selected: tf.Tensor, decision: tf.Tensor,
            seed: tf.Tensor, mask_id: int, vocab_size: int,
            special_ids: Sequence[int], mask_prob: float = 0.8,
            random_prob: float = 0.1):
  """Applies [MASK] / random / keep to `selected` tokens.

  `decision` holds one U[0, 1) draw per token: < mask_prob -> [MASK],
  < mask_prob + random_prob -> random id, else kept. Pass per-token draws for
  BERT, or one draw broadcast over a span for SpanBERT.

  Returns (input_ids, mlm_targets, mlm_weights).
  """
  pool = tf.constant(replacement_ids(vocab_size, special_ids))
  random_tokens = tf.gather(pool, tf.random.stateless_uniform(
      tf.shape(ids), seed=seed, maxval=tf.size(pool), dtype=tf.int32))
  to_mask = selected & (decision < mask_prob)
  to_random = selected & (decision >= mask_prob) & (decision < mask_prob + random_prob)
  out = tf.where(to_mask, tf.cast(mask_id, ids.dtype), ids)
  out = tf.where(to_random, tf.cast(random_tokens, ids.dtype), out)
  targets = tf.where(selected, ids, tf.zeros_like(ids))
  return out, targets, tf.cast(selected, tf.float32)


def mask_tokens(ids: tf.Tensor, seed: tf.Tensor, *, mask_id: int, vocab_size: int,
                special_ids: Sequence[int], rate: float = 0.15,
                mask_prob: float = 0.8, random_prob: float = 0.1,
                is_continuation: Optional[np.ndarray] = None,
                max_predictions: Optional[int] = None):
  """BERT MLM corruption of one 1-D id sequence; see the module doc.

  Returns (input_ids, mlm_targets, mlm_weights).
  """
  if not 0.0 <= rate <= 1.0 or mask_prob + random_prob > 1.0:
    raise ValueError(f"Bad masking probabilities: rate={rate}, mask_prob={mask_prob}, "
                     f"random_prob={random_prob} (need rate in [0, 1] and "
                     "mask_prob + random_prob <= 1).")
  select_seed, decision_seed, random_seed = seeding.split_seed(seed, 3)
  selected = select_words(ids, rate, select_seed, special_ids, is_continuation,
                          max_predictions)
  decision = tf.random.stateless_uniform(tf.shape(ids), seed=decision_seed)
  return corrupt(ids, selected, decision, random_seed, mask_id, vocab_size,
                 special_ids, mask_prob, random_prob)


def mlm_mask(dataset: tf.data.Dataset, *, mask_id: int, vocab_size: int,
             special_ids: Sequence[int], rate: float = 0.15, mask_prob: float = 0.8,
             random_prob: float = 0.1, is_continuation: Optional[np.ndarray] = None,
             max_predictions: Optional[int] = None, key: str = "input_ids",
             seed: Optional[int] = None) -> tf.data.Dataset:
  """seqio preprocessor: masks `key` and adds `mlm_targets` / `mlm_weights`.

  `seed=None` takes seeds from seqio's seed manager (the Task's get_dataset
  seed); an int fixes the stream independently of seqio.
  """
  def fn(ex, seed):
    ex = dict(ex)
    ids = tf.cast(ex[key], tf.int32)
    ex[key], ex["mlm_targets"], ex["mlm_weights"] = mask_tokens(
        ids, seed, mask_id=mask_id, vocab_size=vocab_size, special_ids=special_ids,
        rate=rate, mask_prob=mask_prob, random_prob=random_prob,
        is_continuation=is_continuation, max_predictions=max_predictions)
    return ex

  return seeding.map_with_seed(dataset, fn, seed=seed)


def duplicate_examples(dataset: tf.data.Dataset, dupe_factor: int = 10) -> tf.data.Dataset:
  """The whole dataset `dupe_factor` times over (BERT static masking), as BERT's
  create_pretraining_data loops over all documents once per copy.

  Each copy then draws its own seeds downstream, so copies get different pairs / masks,
  while the whole result is fixed across epochs when it sits before `repeat` (i.e. before
  the Task's CacheDatasetPlaceholder). The copies of a document lie a whole pass apart, so
  a shuffle buffer, a batch or NSP's group of 16 documents (where random B segments come
  from) never holds two of them. Copies in a row put 1.6 near-duplicate pairs into a batch
  of 32 on average (77 of 100 batches held some; 0.08 now), and made most random Bs text
  of A's own document (experiments/scale/data_order.py).
  """
  if dupe_factor < 1:
    raise ValueError(f"dupe_factor must be >= 1, got {dupe_factor}.")
  return dataset if dupe_factor == 1 else dataset.repeat(dupe_factor)
