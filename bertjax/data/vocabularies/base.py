"""What every vocabulary shares: special ids by role, in-graph batching, the `tokenizers`
backed python side."""
import re
from typing import Mapping, Optional, Sequence

import seqio
import tensorflow as tf
import tensorflow_text as tf_text
import tokenizers

from bertjax.data import text_rules

ROLES = ("pad", "unk", "cls", "sep", "mask", "bos", "eos")
MAX_WORD_CHARS = 100  # HF WordPiece: longer words become [UNK].


def added_token_pattern(tokens: Sequence[str]) -> Optional[str]:
  """A regex matching any added token, longest first (HF's leftmost-longest match)."""
  if not tokens:
    return None
  return "|".join(re.escape(t) for t in sorted(set(tokens), key=len, reverse=True))


def replace_rows(ragged: tf.RaggedTensor, mask: tf.Tensor,
                  ids: tf.Tensor) -> tf.RaggedTensor:
  """Rows of a 2-D ragged tensor where `mask` holds become the single id `ids[row]`."""
  n = tf.shape(mask, out_type=tf.int64)[0]
  single = tf.RaggedTensor.from_row_lengths(
      tf.cast(ids, ragged.dtype), tf.ones([n], tf.int64))
  rows = tf.where(mask, tf.range(n) + n, tf.range(n))
  return tf.gather(tf.concat([ragged, single], axis=0), rows)


class RoleIdsMixin:
  """Special ids by role, and batching of `encode_tf` over a `_tokenize_tf` of [n] texts.

  Subclasses set `self._roles` (role -> id) and `self._added` (added token -> id;
  these are split out of the raw text before tokenisation, as HF does).
  """
  _roles: Mapping[str, int]
  _added: Mapping[str, int]

  def _role(self, name: str) -> Optional[int]:
    return self._roles.get(name)

  pad_id = property(lambda self: self._role("pad"))
  unk_id = property(lambda self: self._role("unk"))
  cls_id = property(lambda self: self._role("cls"))
  sep_id = property(lambda self: self._role("sep"))
  mask_id = property(lambda self: self._role("mask"))
  bos_id = property(lambda self: self._role("bos"))
  eos_id = property(lambda self: self._role("eos"))

  @property
  def special_ids(self) -> frozenset:
    return frozenset(self._roles.values()) | frozenset(self._special_added)

  @property
  def added_tokens(self) -> Mapping[str, int]:
    return dict(self._added)

  def _split_added_tf(self, texts: tf.Tensor):
    """[n] texts -> ([n, segments] ragged strings, [m] bool: segment is an added token)."""
    pattern = added_token_pattern(list(self._added))
    texts = tf.strings.regex_replace(texts, r"\x00", text_rules.NUL_STAND_IN)
    if pattern is None:
      segments = tf.RaggedTensor.from_tensor(tf.expand_dims(texts, 1))
      return segments, tf.zeros_like(segments.flat_values, tf.bool)
    segments = tf_text.regex_split(texts, pattern, pattern)
    return segments, tf.strings.regex_full_match(segments.flat_values, pattern)

  def _added_ids_tf(self, segments: tf.Tensor) -> tf.Tensor:
    keys = list(self._added)
    if not keys:  # TF refuses an empty table; with no added tokens no segment is one.
      return tf.fill(tf.shape(segments), tf.constant(-1, tf.int64))
    table = tf.lookup.StaticHashTable(
        tf.lookup.KeyValueTensorInitializer(
            tf.constant(keys, tf.string), tf.constant([self._added[k] for k in keys],
                                                      tf.int64)), -1)
    return table.lookup(segments)

  def _encode_segments_tf(self, texts: tf.Tensor) -> tf.RaggedTensor:
    """Split out added tokens, tokenise the rest with `_tokenize_tf`; [n] -> [n, ?]."""
    segments, is_added = self._split_added_tf(texts)
    flat = segments.flat_values
    ids = self._tokenize_tf(tf.where(is_added, tf.constant(""), flat))
    ids = replace_rows(tf.cast(ids, tf.int64), is_added, self._added_ids_tf(flat))
    return segments.with_flat_values(ids).merge_dims(1, 2)

  def _encode_tf(self, s: tf.Tensor) -> tf.Tensor:
    """Scalar string -> [tokens] int32; [n] strings -> [n, ?] ragged int32."""
    s = tf.convert_to_tensor(s, tf.string)
    ids = tf.cast(self._encode_segments_tf(tf.reshape(s, [-1])), tf.int32)
    return ids.flat_values if s.shape.rank == 0 else ids


class HFTokenizerVocabulary(RoleIdsMixin, seqio.Vocabulary):
  """Shared python side: a `tokenizers.Tokenizer` gives encode / decode."""

  def __init__(self, tokenizer: tokenizers.Tokenizer, roles: Mapping[str, str],
               extra_ids: int = 0):
    super().__init__(extra_ids=extra_ids)
    # A saved tokenizer.json may carry padding/truncation; encode() must not.
    tokenizer.no_padding()
    tokenizer.no_truncation()
    self._tokenizer = tokenizer
    self._roles = {r: tokenizer.token_to_id(t) for r, t in roles.items()
                   if t is not None and tokenizer.token_to_id(t) is not None}
    added = tokenizer.get_added_tokens_decoder()
    self._added = {t.content: i for i, t in added.items()}
    self._special_added = [i for i, t in added.items() if t.special]

  @property
  def tokenizer(self) -> tokenizers.Tokenizer:
    return self._tokenizer

  @property
  def _base_vocab_size(self) -> int:
    return self._tokenizer.get_vocab_size(with_added_tokens=True)

  def _encode(self, s: str) -> Sequence[int]:
    return self._tokenizer.encode(s, add_special_tokens=False).ids

  def _decode(self, ids) -> str:
    return self._tokenizer.decode([int(i) for i in ids], skip_special_tokens=True)

  def id_to_token(self, i: int) -> Optional[str]:
    return self._tokenizer.id_to_token(i)

  def token_to_id(self, token: str) -> Optional[int]:
    return self._tokenizer.token_to_id(token)

  def __eq__(self, other):
    return (type(self) is type(other) and
            self._tokenizer.to_str() == other._tokenizer.to_str())

  def __hash__(self):
    return hash(self._tokenizer.to_str())

  # A pickle holds the tokenizer as its JSON text.
  def __getstate__(self):
    state = self.__dict__.copy()
    state["_tokenizer"] = self._tokenizer.to_str()
    return state

  def __setstate__(self, state):
    state["_tokenizer"] = tokenizers.Tokenizer.from_str(state["_tokenizer"])
    self.__dict__.update(state)
