"""A word-level vocabulary built from a task's own text, for word-embedding models
(the BiLSTM student, bertjax.models.bilstm).

Words are lowercased and split into runs of letters/digits (keeping inner apostrophes
and hyphens, so SST-2's "n't", "'s" and "well-made" stay whole) and single punctuation
runs. Id 0 is padding, id 1 the unknown word; BERT's "[MASK]" (written by the masking
augmentation, bertjax.data.augment) reads as the unknown word, as in Tang et al. (2019).
Ids follow descending frequency (ties alphabetical), so the same text always gives the
same vocabulary; the file is one word per line, its line number the id.
"""
import collections
import hashlib
import os
import re
from typing import Iterable, Sequence

import numpy as np

PAD, UNK, MASK = "<pad>", "<unk>", "[MASK]"
SPECIALS = (PAD, UNK)
_WORD = re.compile(r"\[MASK\]|\w+(?:['-]\w+)*|'\w+|[^\w\s]+")


def split_words(text: str) -> list[str]:
  """Lowercased words of `text` ("[MASK]" is kept as one word)."""
  return [w if w == MASK else w.lower() for w in _WORD.findall(text)]


class WordVocabulary:
  """Words <-> ids; `encode` maps an unknown word (and "[MASK]") to `unk_id`."""
  pad_id, unk_id = 0, 1

  def __init__(self, words: Sequence[str], source: str = "<memory>"):
    words = list(words)
    if tuple(words[:len(SPECIALS)]) != SPECIALS:
      raise ValueError(f"Word vocabulary {source}: must start with {list(SPECIALS)}; starts with "
                       f"{words[:len(SPECIALS)]}. Was it written by WordVocabulary.save?")
    index = {}
    for i, word in enumerate(words):
      if word in index:
        raise ValueError(f"Word vocabulary {source}: {word!r} appears twice (ids {index[word]} "
                         f"and {i}).")
      index[word] = i
    self.words, self._index, self.source = words, index, source

  @classmethod
  def build(cls, texts: Iterable[str | Sequence[str]], min_count: int = 1,
            max_size: int | None = None) -> "WordVocabulary":
    """From raw texts or already-split word lists: every word seen `min_count` times,
    the `max_size` most frequent at most (specials included)."""
    counts = collections.Counter()
    for text in texts:
      counts.update(split_words(text) if isinstance(text, str) else text)
    for special in SPECIALS + (MASK,):
      counts.pop(special, None)
    ranked = sorted((w for w, c in counts.items() if c >= min_count),
                    key=lambda w: (-counts[w], w))
    if max_size is not None:
      ranked = ranked[:max(max_size - len(SPECIALS), 0)]
    return cls(list(SPECIALS) + ranked, source=f"built from {sum(counts.values())} words")

  def __len__(self) -> int:
    return len(self.words)

  def __contains__(self, word: str) -> bool:
    return word in self._index

  def encode(self, words: Sequence[str]) -> list[int]:
    return [self._index.get(w, self.unk_id) for w in words]

  def fingerprint(self) -> str:
    """sha256 of the word list: a checkpoint records it to catch a swapped vocabulary."""
    return hashlib.sha256("\n".join(self.words).encode("utf-8")).hexdigest()

  def save(self, path: str) -> None:
    with open(path, "w", encoding="utf-8") as f:
      f.write("\n".join(self.words) + "\n")

  @classmethod
  def load(cls, path: str) -> "WordVocabulary":
    if not os.path.isfile(path):
      raise FileNotFoundError(f"No word vocabulary at {path!r} (one word per line, as "
                              "WordVocabulary.save writes).")
    with open(path, encoding="utf-8") as f:
      return cls(f.read().splitlines(), source=path)


def encode_sentences(vocab: WordVocabulary, sentences: Sequence[Sequence[str]],
                     max_length: int) -> dict[str, np.ndarray]:
  """Word lists -> `input_ids` / `attention_mask` [N, max_length] (longer ones truncated)."""
  ids = np.zeros((len(sentences), max_length), np.int32)
  for row, words in enumerate(sentences):
    encoded = vocab.encode(words[:max_length])
    ids[row, :len(encoded)] = encoded
  return {"input_ids": ids, "attention_mask": (ids != vocab.pad_id).astype(np.int32)}
