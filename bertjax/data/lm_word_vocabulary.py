"""A word-level LM vocabulary: ELMo's softmax vocabulary, built from the training text, as a
seqio.Vocabulary with <S> / </S> marks and a tf.data lookup (the `bilm` recipe).

Words are split the same way in Python and in tf.data (`split_words_tf`): Unicode
spaces separate words, and every character that is not a letter, digit, mark or `_`
is a word of its own ("don't." -> don ' t .). Case is kept, as in ELMo.

Ids: 0 <pad>, 1 <S>, 2 </S>, 3 <UNK>, then the `size` most frequent words of the
source's train split, most frequent first (ties in byte order), so the vocabulary is a
deterministic function of the text. `lm_word_vocabulary()` (gin) builds it once per
process; `save` / `from_file` keep it as one word per line (ELMo's vocabulary format).
"""
import collections
import functools
import os
from typing import Iterable, Optional, Sequence

import gin
import seqio
import tensorflow as tf

from bertjax import characters
from bertjax.data.sources import default_source

PAD, BOS, EOS, UNK = "<pad>", characters.BOS_WORD, characters.EOS_WORD, "<UNK>"
SPECIALS = (PAD, BOS, EOS, UNK)


def split_words_tf(text: tf.Tensor) -> tf.RaggedTensor:
  """Text (any shape of strings) -> its words, ragged on a new last axis."""
  text = tf.strings.regex_replace(text, r"[\pZ\s]+", " ")
  text = tf.strings.regex_replace(text, r"([^\pL\pN\pM_ ])", r" \1 ")
  words = tf.strings.split(text, sep=" ")
  return tf.ragged.boolean_mask(words, tf.strings.length(words) > 0)


def split_words(text: str) -> list[str]:
  """The words of one text, as split_words_tf splits them."""
  return [w.decode("utf-8") for w in split_words_tf(tf.constant(text)).numpy()]


class LMWordVocabulary(seqio.Vocabulary):
  """Words -> ids (see module doc); unknown words map to <UNK>."""

  def __init__(self, words: Sequence[str]):
    duplicates = sorted({w for w, n in collections.Counter(words).items() if n > 1})
    clash = sorted(set(words) & set(SPECIALS))
    if duplicates or clash:
      raise ValueError(f"LMWordVocabulary: words must be distinct and not {SPECIALS}; repeated "
                       f"{duplicates[:5]}, reserved {clash}.")
    self.words = list(SPECIALS) + list(words)
    self._index = {w: i for i, w in enumerate(self.words)}
    self._table = None
    super().__init__(extra_ids=0)

  @property
  def pad_id(self) -> int:
    return 0

  @property
  def bos_id(self) -> int:
    return 1

  @property
  def eos_id(self) -> int:
    return 2

  @property
  def unk_id(self) -> int:
    return 3

  @property
  def _base_vocab_size(self) -> int:
    return len(self.words)

  def _encode(self, s: str) -> list[int]:
    return [self._index.get(w, self.unk_id) for w in split_words(s)]

  def _decode(self, ids: Iterable[int]) -> str:
    return " ".join(self.words[int(i)] for i in ids if 0 < int(i) < len(self.words))

  def lookup_tf(self, words: tf.Tensor) -> tf.Tensor:
    """int32 ids of word strings (any shape)."""
    if self._table is None:
      with tf.init_scope():  # eager, so every tf.data graph that maps words can use it
        self._table = tf.lookup.StaticHashTable(
            tf.lookup.KeyValueTensorInitializer(tf.constant(self.words),
                                                tf.range(len(self.words), dtype=tf.int32)),
            default_value=self.unk_id)
    return self._table.lookup(words)

  def _encode_tf(self, s: tf.Tensor) -> tf.Tensor:
    return self.lookup_tf(split_words_tf(s))

  def _decode_tf(self, ids: tf.Tensor) -> tf.Tensor:
    words = tf.gather(tf.constant(self.words), tf.maximum(ids, 0))
    return tf.strings.reduce_join(tf.where(ids > 0, words, ""), axis=-1, separator=" ")

  def save(self, path: str) -> None:
    """One word per line, the specials first (what `from_file` reads)."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
      f.write("\n".join(self.words) + "\n")

  @classmethod
  def from_file(cls, path: str) -> "LMWordVocabulary":
    with open(path, encoding="utf-8") as f:
      words = f.read().split("\n")[:-1]
    if tuple(words[:len(SPECIALS)]) != SPECIALS:
      raise ValueError(f"{path}: a word vocabulary file starts with {SPECIALS}, one per line; "
                       f"it starts with {words[:len(SPECIALS)]}.")
    return cls(words[len(SPECIALS):])

  def __eq__(self, other):
    return isinstance(other, LMWordVocabulary) and self.words == other.words

  def __hash__(self):
    return hash(tuple(self.words))


def count_words(texts: tf.data.Dataset) -> collections.Counter:
  """Word counts over a dataset of {'text'} documents."""
  counts = collections.Counter()
  words = texts.batch(256).map(lambda ex: split_words_tf(ex["text"]).flat_values)
  for chunk in words.as_numpy_iterator():
    counts.update(chunk.tolist())
  return counts


def most_frequent(counts: collections.Counter, size: int) -> list[str]:
  """The `size` most frequent words (ties in byte order), specials left out."""
  reserved = {w.encode() for w in SPECIALS}
  ranked = sorted((w for w in counts if w not in reserved), key=lambda w: (-counts[w], w))
  return [w.decode("utf-8", errors="replace") for w in ranked[:size]]


@gin.configurable
def lm_word_vocabulary(size: int = 8000, source: Optional[seqio.DataSource] = None,
                    vocab_file: Optional[str] = None, split: str = "train") -> LMWordVocabulary:
  """The `size` most frequent words of `source`'s `split` (default: the recipes' default
  source, i.e. `default_source.source` or the embedded corpus) + the 4 specials.

  With `vocab_file`: read it when it exists, else build and write it there.
  """
  if vocab_file and os.path.exists(vocab_file):
    return LMWordVocabulary.from_file(vocab_file)
  if size < 1:
    raise ValueError(f"lm_word_vocabulary.size={size}: keep at least one word.")
  vocab = _built(size, source, split)
  if vocab_file:
    vocab.save(vocab_file)
  return vocab


@functools.lru_cache(maxsize=4)
def _built(size: int, source: Optional[seqio.DataSource], split: str) -> LMWordVocabulary:
  source = default_source(source)
  if split not in source.splits:
    raise ValueError(f"lm_word_vocabulary: the source has no {split!r} split (it has "
                     f"{list(source.splits)}).")
  counts = count_words(source.get_dataset(split, shuffle=False))
  return LMWordVocabulary(most_frequent(counts, size))
