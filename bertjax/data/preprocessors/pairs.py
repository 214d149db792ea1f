"""Documents -> BERT-style input sequences: NSP / SOP pairs and RoBERTa formats.

A document is the feature `sentences`: an int32 RaggedTensor [num_sentences,
None] of token ids without special tokens (`tokenize_sentences` builds it from
text). The outputs are
  input_ids       int32 [n]  [CLS] A [SEP] B [SEP]   (pairs)  or [CLS] X [SEP]
  token_type_ids  int32 [n]  0 over [CLS] A [SEP], 1 over B [SEP]
  next_sentence_label int32 []  (NSP: 1 = B is from another document;
                                 SOP: 1 = A and B were swapped; as HF)

Formats (RoBERTa, Liu et al. 2019, sec. 4.2):
  sentence_pairs(unit='segment', objective='nsp')   SEGMENT-PAIR+NSP (= BERT)
  sentence_pairs(unit='sentence', objective='nsp')  SENTENCE-PAIR+NSP
  sentence_pairs(unit='segment', objective='sop')   ALBERT sentence order
  full_sentences(cross_documents=True)              FULL-SENTENCES
  full_sentences(cross_documents=False)             DOC-SENTENCES

Pair construction follows BERT's create_instances_from_document: a target
length (max, or uniform in [2, max] with prob. `short_seq_prob`), a chunk of
whole sentences reaching it, a random split point into A and B; for NSP, B is
replaced with prob. 0.5 (always, if the chunk is one sentence) by sentences
from a random other document, and the unused sentences go back to the pool;
the pair is then truncated to fit, one token at a time from the longer side,
each from its front or back at random.

Random documents come from the same group of `group_size` consecutive documents
(shuffle the source for randomness across the corpus).

Rules for awkward input (counted in `stats`, never an error):
  * empty sentences are dropped, then documents with no sentences are dropped;
  * pairs: documents with < 2 sentences are dropped (no in-document B exists);
    SOP chunks of a single sentence are dropped; a group holding one document
    has no "other document", so its NSP pairs are all in-order;
  * over-long sentences: truncated (pairs) or split into pieces of the maximum
    length (full_sentences);
  * documents shorter than the sequence length give one shorter example (the
    feature converter pads or packs it).
"""
from typing import Mapping, Optional, Union

import tensorflow as tf

from bertjax.data.preprocessors import seeding
from bertjax.data.preprocessors import stats

SeqLen = Union[int, Mapping[str, int]]


def _length(sequence_length: SeqLen, key: str) -> int:
  return sequence_length[key] if isinstance(sequence_length, Mapping) else sequence_length


# ----------------------------------------------------------------- tokenizing
def _split_sentences(text: tf.Tensor, split: str) -> tf.Tensor:
  if split == "punctuation":
    # RE2 has no look-behind: put a newline after terminal punctuation instead.
    text = tf.strings.regex_replace(text, r"([.!?][\"'\)\]]*)\s+", "\\1\n")
  elif split != "newline":
    raise ValueError(f"Unknown sentence split {split!r}; use 'newline' or 'punctuation'.")
  lines = tf.strings.strip(tf.strings.split(text, "\n"))
  return tf.boolean_mask(lines, tf.strings.length(lines) > 0)


def _encode_batch(vocabulary, lines: tf.Tensor) -> tf.RaggedTensor:
  """Encodes a 1-D string tensor to a [n, None] RaggedTensor of ids."""
  try:  # Fast path: tokenizers such as SentencePiece encode a batch at once.
    ids = vocabulary.encode_tf(lines)
    if isinstance(ids, tf.RaggedTensor) and ids.shape.rank == 2:
      return tf.cast(ids, tf.int32)
  except (ValueError, TypeError, tf.errors.InvalidArgumentError):
    pass
  return tf.map_fn(lambda s: tf.cast(vocabulary.encode_tf(s), tf.int32), lines,
                   fn_output_signature=tf.RaggedTensorSpec([None], tf.int32, 0))


def tokenize_sentences(dataset: tf.data.Dataset, vocabulary, text_key: str = "text",
                       sentence_split: str = "newline") -> tf.data.Dataset:
  """seqio preprocessor: text document -> `sentences` (ragged ids, no specials).

  `sentence_split='newline'` takes one sentence (or paragraph) per line, as in
  BERT's pretraining text format; 'punctuation' also splits after . ! ?.
  """
  def fn(ex):
    ids = _encode_batch(vocabulary, _split_sentences(ex[text_key], sentence_split))
    return {"sentences": ids}

  return dataset.map(fn, num_parallel_calls=tf.data.AUTOTUNE)


def _clean_documents(dataset: tf.data.Dataset, min_sentences: int) -> tf.data.Dataset:
  """Drops empty sentences, then documents with < min_sentences (counted)."""
  def clean(ex):
    s = ex["sentences"]
    s = tf.ragged.boolean_mask(s, s.row_lengths() > 0)
    return {"sentences": s}

  def keep(ex):
    ok = ex["sentences"].nrows() >= min_sentences
    counted = stats.count(f"documents/dropped_fewer_than_{min_sentences}_sentences",
                          tf.cast(tf.logical_not(ok), tf.int64))
    with tf.control_dependencies([counted]):
      return tf.identity(ok)

  return dataset.map(clean, num_parallel_calls=tf.data.AUTOTUNE).filter(keep)


def _draw_target(max_tokens: int, short_seq_prob: float, seed) -> tf.Tensor:
  """max_tokens, or with prob. short_seq_prob uniform in [2, max_tokens]."""
  coin_seed, len_seed = seeding.split_seed(seed, 2)
  short = tf.random.stateless_uniform([], seed=coin_seed) < short_seq_prob
  low = min(2, max_tokens)
  short_len = tf.random.stateless_uniform([], seed=len_seed, minval=low,
                                          maxval=max_tokens + 1, dtype=tf.int32)
  return tf.where(short, short_len, max_tokens)


def _search(csum: tf.Tensor, value: tf.Tensor, side: str) -> tf.Tensor:
  return tf.searchsorted(csum[None], tf.reshape(value, [1, 1]), side=side)[0, 0]


def _rand_int(seed, low, high) -> tf.Tensor:
  """Uniform int in [low, high) (high > low)."""
  return tf.random.stateless_uniform([], seed=seed, minval=low, maxval=high, dtype=tf.int32)


# ----------------------------------------------------------------- pairs
def truncate_pair(a: tf.Tensor, b: tf.Tensor, max_tokens: int, seed):
  """BERT's truncate_seq_pair, in closed form.

  Removing one token at a time from the longer side (B on ties) ends with
  len(A) = min(len(A), max(ceil(max/2), max - len(B))); each removed token comes
  from the front or back with prob. 1/2 (a binomial split).
  """
  la, lb = tf.size(a), tf.size(b)
  new_la = tf.where(la + lb > max_tokens,
                    tf.minimum(la, tf.maximum((max_tokens + 1) // 2, max_tokens - lb)), la)
  new_lb = tf.minimum(lb, max_tokens - new_la)

  def cut(x, new_len, s):
    removed = tf.size(x) - new_len
    front = tf.cast(tf.random.stateless_binomial(
        [], seed=s, counts=tf.cast(removed, tf.float32), probs=0.5), tf.int32)
    return x[front:front + new_len]

  sa, sb = seeding.split_seed(seed, 2)
  return cut(a, new_la, sa), cut(b, new_lb, sb), tf.cast(la + lb > max_tokens, tf.int64)


def _concat_rows(doc: tf.RaggedTensor, start, end) -> tf.Tensor:
  return doc[start:end].flat_values


def _pair_instances(group: tf.RaggedTensor, index: tf.Tensor, seed, *, max_tokens: int,
                    objective: Optional[str], unit: str, short_seq_prob: float,
                    cls_id: int, sep_id: int):
  """All pair instances of document `group[index]`; others in `group` are partners."""
  doc = group[index]
  n = tf.cast(doc.nrows(), tf.int32)
  csum = tf.concat([[0], tf.cumsum(tf.cast(doc.row_lengths(), tf.int32))], 0)
  group_size = tf.cast(group.nrows(), tf.int32)

  def body(i, start, ids_ta, types_ta, labels_ta, num_out, skipped, truncated):
    s_target, s_split, s_coin, s_partner, s_trunc = seeding.split_seed(
        tf.random.experimental.stateless_fold_in(seed, i), 5)
    target = _draw_target(max_tokens, short_seq_prob, s_target)
    if unit == "sentence":
      end = tf.minimum(start + 2, n)
    else:  # The first end whose chunk reaches the target, as in BERT.
      end = tf.clip_by_value(_search(csum, csum[start] + target, "left"), start + 1, n)
    num = end - start
    a_end = start + tf.where(num < 2, 1, _rand_int(s_split, 1, tf.maximum(num, 2)))
    a = _concat_rows(doc, start, a_end)
    coin = tf.random.stateless_uniform([], seed=s_coin) < 0.5
    label = tf.constant(0)
    next_start = end
    skip = tf.constant(False)
    if objective == "nsp":
      is_random = (group_size > 1) & ((num == 1) | coin)
      skip = (num == 1) & tf.logical_not(is_random)

      def random_b():
        s_doc, s_start = seeding.split_seed(s_partner, 2)
        other = group[(index + _rand_int(s_doc, 1, tf.maximum(group_size, 2))) % group_size]
        m = tf.cast(other.nrows(), tf.int32)
        ocsum = tf.concat([[0], tf.cumsum(tf.cast(other.row_lengths(), tf.int32))], 0)
        b_start = _rand_int(s_start, 0, m)
        if unit == "sentence":
          b_end = b_start + 1
        else:
          b_target = tf.maximum(target - tf.size(a), 1)
          b_end = tf.clip_by_value(_search(ocsum, ocsum[b_start] + b_target, "left"),
                                   b_start + 1, m)
        return _concat_rows(other, b_start, b_end)

      b = tf.cond(is_random, random_b, lambda: _concat_rows(doc, a_end, end))
      label = tf.cast(is_random, tf.int32)
      next_start = tf.where(is_random, a_end, end)  # Put unused sentences back.
    else:
      b = _concat_rows(doc, a_end, end)
      if objective == "sop":
        skip = num == 1
        a, b = tf.cond(coin, lambda: (b, a), lambda: (a, b))
        label = tf.cast(coin, tf.int32)
    a, b, was_cut = truncate_pair(a, b, max_tokens, s_trunc)
    la, lb = tf.size(a), tf.size(b)
    sep_b = tf.fill([tf.minimum(lb, 1)], sep_id)  # No trailing [SEP] without a B.
    ids = tf.concat([[cls_id], a, [sep_id], b, sep_b], 0)
    types = tf.concat([tf.zeros([la + 2], tf.int32), tf.ones([lb + tf.size(sep_b)], tf.int32)], 0)

    def write():
      return (ids_ta.write(num_out, ids), types_ta.write(num_out, types),
              labels_ta.write(num_out, label), num_out + 1)

    ids_ta, types_ta, labels_ta, num_out = tf.cond(
        skip, lambda: (ids_ta, types_ta, labels_ta, num_out), write)
    return (i + 1, next_start, ids_ta, types_ta, labels_ta, num_out,
            skipped + tf.cast(skip, tf.int64), truncated + was_cut)

  loop = tf.while_loop(
      lambda i, start, *_: start < n, body,
      (0, 0, _ragged_array(), _ragged_array(), tf.TensorArray(tf.int32, size=0, dynamic_size=True),
       0, tf.constant(0, tf.int64), tf.constant(0, tf.int64)))
  _, _, ids_ta, types_ta, labels_ta, num_out, skipped, truncated = loop
  counted = [stats.count(f"pairs/{objective}_dropped_single_sentence_chunk", skipped),
             stats.count("pairs/truncated_pairs", truncated)]
  with tf.control_dependencies(counted):
    out = {"input_ids": _stack_ragged(ids_ta, num_out),
           "token_type_ids": _stack_ragged(types_ta, num_out)}
    if objective is not None:
      out["next_sentence_label"] = labels_ta.stack()[:num_out]
  return out


def _ragged_array() -> tf.TensorArray:
  """A growable array of variable-length int32 vectors."""
  return tf.TensorArray(tf.int32, size=0, dynamic_size=True, infer_shape=False,
                        element_shape=[None])


def _stack_ragged(t: tf.TensorArray, num: tf.Tensor) -> tf.RaggedTensor:
  """[num, None] RaggedTensor from a `_ragged_array`."""
  lengths = tf.map_fn(lambda k: tf.size(t.read(k)), tf.range(num),
                      fn_output_signature=tf.int32)
  values = tf.cond(num > 0, t.concat, lambda: tf.zeros([0], tf.int32))
  return tf.RaggedTensor.from_row_lengths(values, tf.cast(lengths, tf.int64))


def sentence_pairs(dataset: tf.data.Dataset, sequence_length: SeqLen, *, cls_id: int,
                   sep_id: int, objective: Optional[str] = "nsp", unit: str = "segment",
                   short_seq_prob: float = 0.1, group_size: int = 16,
                   key: str = "input_ids", seed: Optional[int] = None) -> tf.data.Dataset:
  """seqio preprocessor: documents -> [CLS] A [SEP] B [SEP] examples.

  Args:
    sequence_length: total length L (int, or seqio's mapping read at `key`);
      A and B together get at most L - 3 tokens.
    objective: 'nsp', 'sop' or None (pairs of in-order segments, no label).
    unit: 'segment' (A and B are runs of whole sentences filling the target
      length, BERT) or 'sentence' (A and B are single sentences).
    group_size: documents per group; random B segments come from the group.
  """
  if objective not in ("nsp", "sop", None):
    raise ValueError(f"objective must be 'nsp', 'sop' or None, got {objective!r}.")
  if unit not in ("segment", "sentence"):
    raise ValueError(f"unit must be 'segment' or 'sentence', got {unit!r}.")
  max_tokens = _length(sequence_length, key) - 3
  if max_tokens < 2:
    raise ValueError(f"sequence length {max_tokens + 3} is too short for a pair (need >= 5).")

  def per_document(ex, seed):
    return _pair_instances(ex["group"], ex["index"], seed, max_tokens=max_tokens,
                           objective=objective, unit=unit, short_seq_prob=short_seq_prob,
                           cls_id=cls_id, sep_id=sep_id)

  docs = _clean_documents(dataset, min_sentences=2).batch(group_size)
  docs = docs.flat_map(lambda g: tf.data.Dataset.range(g["sentences"].nrows()).map(
      lambda i: {"group": g["sentences"], "index": tf.cast(i, tf.int32)}))
  out = seeding.map_with_seed(docs, per_document, seed=seed).unbatch()
  if key != "input_ids":
    out = out.map(lambda ex: {key if k == "input_ids" else k: v for k, v in ex.items()})
  return out


# ----------------------------------------------------------------- full sentences
def _split_long(sentences: tf.RaggedTensor, cap: int):
  """Splits each sentence longer than `cap` into consecutive pieces of <= cap."""
  lengths = tf.cast(sentences.row_lengths(), tf.int32)
  starts = tf.ragged.range(tf.zeros_like(lengths), lengths, cap)
  piece_lengths = tf.minimum(cap, tf.expand_dims(lengths, 1) - starts).flat_values
  num_split = tf.reduce_sum(tf.cast(lengths > cap, tf.int64))
  return tf.RaggedTensor.from_row_lengths(sentences.flat_values,
                                          tf.cast(piece_lengths, tf.int64)), num_split


def _greedy_chunks(lengths: tf.Tensor, cap: int, short_seq_prob: float, seed) -> tf.Tensor:
  """Token counts of consecutive chunks of whole sentences, each <= its target.

  Targets are `cap` or (prob. short_seq_prob) uniform in [2, cap]; a chunk
  always takes at least one sentence (every sentence is <= cap already).
  """
  n = tf.size(lengths)
  csum = tf.concat([[0], tf.cumsum(lengths)], 0)

  def body(i, start, sizes):
    target = _draw_target(cap, short_seq_prob, tf.random.experimental.stateless_fold_in(seed, i))
    end = tf.clip_by_value(_search(csum, csum[start] + target, "right") - 1, start + 1, n)
    return i + 1, end, sizes.write(i, csum[end] - csum[start])

  _, _, sizes = tf.while_loop(lambda i, start, _: start < n, body,
                              (0, 0, tf.TensorArray(tf.int32, size=0, dynamic_size=True)))
  return sizes.stack()


def full_sentences(dataset: tf.data.Dataset, sequence_length: SeqLen, *, cls_id: int,
                   sep_id: int, cross_documents: bool = True, docs_per_group: int = 64,
                   short_seq_prob: float = 0.0, key: str = "input_ids",
                   seed: Optional[int] = None) -> tf.data.Dataset:
  """seqio preprocessor: documents -> [CLS] s_i s_i+1 ... [SEP], no NSP.

  Packs whole contiguous sentences up to L - 2 tokens. With `cross_documents`
  (FULL-SENTENCES) a sequence may run on into the next document of the same
  group of `docs_per_group`, with an extra [SEP] appended to each document's
  last sentence; without it (DOC-SENTENCES) sequences stay inside one document
  and its last one may be shorter. Sentences longer than L - 2 are split.
  """
  cap = _length(sequence_length, key) - 2
  if cap < 1:
    raise ValueError(f"sequence length {cap + 2} leaves no room for tokens.")

  def per_group(ex, seed):
    group = ex["sentences"]  # [docs, sentences, tokens]
    sentences = group.values
    if cross_documents:
      # One extra [SEP] after the last sentence of every document but the last.
      last = group.row_limits()[:-1] - 1
      extra = tf.scatter_nd(tf.expand_dims(last, 1), tf.ones_like(last, tf.int32),
                            [sentences.nrows()])
      seps = tf.RaggedTensor.from_row_lengths(tf.fill([tf.reduce_sum(extra)], sep_id),
                                              tf.cast(extra, tf.int64))
      sentences = tf.concat([sentences, seps], axis=1)
    sentences, num_split = _split_long(sentences, cap)
    sizes = _greedy_chunks(tf.cast(sentences.row_lengths(), tf.int32), cap, short_seq_prob, seed)
    chunks = tf.RaggedTensor.from_row_lengths(sentences.flat_values, tf.cast(sizes, tf.int64))
    rows = chunks.nrows()
    ids = tf.concat([tf.fill([rows, 1], cls_id), chunks, tf.fill([rows, 1], sep_id)], axis=1)
    with tf.control_dependencies([stats.count("full_sentences/split_long_sentences", num_split)]):
      return {key: tf.identity(ids), "token_type_ids": tf.zeros_like(ids)}

  docs = _clean_documents(dataset, min_sentences=1)
  docs = docs.batch(docs_per_group if cross_documents else 1)
  return seeding.map_with_seed(docs, per_group, seed=seed).unbatch()
