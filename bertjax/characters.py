"""ELMo's character ids: every word becomes a fixed row of UTF-8 byte ids.

The `char_ids` batch feature's encoding: bertjax.data writes it, bertjax.models.elmo
reads it, so it sits below both.

The scheme of the released model (Peters et al., 2018; bilm-tf and AllenNLP agree):

  word  -> [begin-of-word, its first 48 UTF-8 bytes, end-of-word, padding-char ...]
  <S>   -> [begin-of-word, begin-of-sentence, end-of-word, padding-char ...]
  </S>  -> [begin-of-word, end-of-sentence, end-of-word, padding-char ...]

Byte b has id b + 1 and the marks ids 257..261, so id 0 is free for the rows of
padding *words* (a batch's shorter sentences): 262 ids in all. Words longer than
`max_characters - 2` bytes keep their first bytes (the released model's rule; the
data recipe counts how often that happens). bertjax.data.recipes.bilm builds the
same ids inside tf.data.
"""
from typing import Sequence

import numpy as np

BOS_WORD, EOS_WORD = "<S>", "</S>"
MAX_CHARACTERS = 50
# The marks, before the +1 shift that frees id 0.
BEGIN_SENTENCE, END_SENTENCE, BEGIN_WORD, END_WORD, PAD_CHAR = 256, 257, 258, 259, 260
VOCAB_SIZE = PAD_CHAR + 2  # 0 (padding word) + bytes 1..256 + marks 257..261 = 262 ids
PADDING_WORD = 0


def _row(content: Sequence[int], max_characters: int) -> np.ndarray:
  row = np.full(max_characters, PAD_CHAR, np.int32)
  row[0] = BEGIN_WORD
  row[1:1 + len(content)] = content
  row[1 + len(content)] = END_WORD
  return row + 1


def word_ids(word: str, max_characters: int = MAX_CHARACTERS) -> np.ndarray:
  """int32 [max_characters]: the character ids of one word (see module doc)."""
  if max_characters < 3:
    raise ValueError(f"max_characters={max_characters}: a word needs room for its begin and "
                     f"end marks and at least one byte (>= 3).")
  if word == BOS_WORD:
    return _row([BEGIN_SENTENCE], max_characters)
  if word == EOS_WORD:
    return _row([END_SENTENCE], max_characters)
  content = list(word.encode("utf-8", errors="ignore")[:max_characters - 2])
  return _row(content, max_characters)


def sentence_ids(words: Sequence[str], max_characters: int = MAX_CHARACTERS,
                 add_boundaries: bool = True) -> np.ndarray:
  """int32 [n (+2), max_characters]: one sentence, by default inside <S> ... </S>."""
  words = ([BOS_WORD] + list(words) + [EOS_WORD]) if add_boundaries else list(words)
  if not words:
    return np.zeros((0, max_characters), np.int32)
  return np.stack([word_ids(w, max_characters) for w in words])


def batch_ids(sentences: Sequence[Sequence[str]], max_words: int,
              max_characters: int = MAX_CHARACTERS,
              add_boundaries: bool = True) -> np.ndarray:
  """int32 [N, max_words, max_characters] of tokenized sentences, padded with id 0.

  A sentence with more than `max_words` words (its <S> and </S> included) is an
  error naming it: cutting it would silently drop words a tagger must label.
  """
  extra = 2 if add_boundaries else 0
  out = np.zeros((len(sentences), max_words, max_characters), np.int32)
  for i, words in enumerate(sentences):
    if len(words) + extra > max_words:
      raise ValueError(f"Sentence {i} has {len(words)} words (+{extra} for <S> </S>), more than "
                       f"max_words={max_words}; raise max_words to at least "
                       f"{max(len(s) for s in sentences) + extra}.")
    ids = sentence_ids(words, max_characters, add_boundaries)
    out[i, :len(ids)] = ids
  return out


def check_ids(char_ids: np.ndarray, char_vocab_size: int, max_characters: int,
              where: str = "char_ids") -> None:
  """Fails naming what disagrees when ids do not fit a character CNN's configuration."""
  char_ids = np.asarray(char_ids)
  if char_ids.shape[-1] != max_characters:
    raise ValueError(f"{where}: words of {char_ids.shape[-1]} characters, but the character "
                     f"CNN takes {max_characters} (ElmoConfig.max_characters_per_word); encode "
                     f"words with bertjax.characters at that width.")
  if char_ids.size and (char_ids.min() < 0 or char_ids.max() >= char_vocab_size):
    raise ValueError(f"{where}: character id {int(char_ids.max())} (min {int(char_ids.min())}) "
                     f"is outside the character vocabulary of {char_vocab_size} ids "
                     f"(ElmoConfig.char_vocab_size); bertjax's scheme needs {VOCAB_SIZE}.")
