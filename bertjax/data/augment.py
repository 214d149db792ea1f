"""Tang et al. (2019)'s data augmentation: a transfer set for distillation from the
task's own training sentences (their Sec. 3.3).

For each word, draw X ~ U[0, 1]:
  * X < p_mask: the word becomes "[MASK]" (BERT's mask token for the teacher, the
    unknown word for the student: bertjax.data.word_vocabulary);
  * p_mask <= X < p_mask + p_pos: POS-guided replacement: a word drawn from the
    unigram distribution of the training words that carry the same POS tag
    (bertjax.data.pos_lexicon; a tag held by one word only leaves the word as is).
The two are exclusive. Then, with probability p_ngram, only a random n-gram of the
result is kept (n uniform in [1, max_ngram], capped at the sentence length). Each
example yields up to `copies` augmented ones (the paper's n_iter); duplicates, and
copies equal to the original, are dropped. A sentence pair is augmented on both sides
independently (one of the paper's options). The teacher then scores every one
(bertjax.distill.teacher): the augmented sentences have no labels of their own.
"""
import collections
import dataclasses
from typing import Sequence

import numpy as np

from bertjax.data.pos_lexicon import PosLexicon
from bertjax.data.word_vocabulary import MASK

Words = tuple[str, ...]


@dataclasses.dataclass(frozen=True)
class AugmentConfig:
  """The paper's settings: p_mask = p_pos = 0.1, p_ng = 0.25, n-grams of 1-5 words,
  n_iter = 20 for SST-2."""
  p_mask: float = 0.1
  p_pos: float = 0.1
  p_ngram: float = 0.25
  max_ngram: int = 5
  copies: int = 20

  def __post_init__(self):
    for name in ("p_mask", "p_pos", "p_ngram"):
      if not 0.0 <= getattr(self, name) <= 1.0:
        raise ValueError(f"AugmentConfig.{name} = {getattr(self, name)}: must be in [0, 1].")
    if self.p_mask + self.p_pos > 1.0:
      raise ValueError(f"AugmentConfig: p_mask + p_pos = {self.p_mask + self.p_pos} > 1 (they "
                       "are exclusive choices per word).")
    if self.max_ngram < 1 or self.copies < 0:
      raise ValueError(f"AugmentConfig: max_ngram = {self.max_ngram} must be >= 1 and copies = "
                       f"{self.copies} >= 0.")


class Augmenter:
  """Draws augmented copies of examples (a tuple of one or two word sequences); `tagger`
  and the training sentences `corpus` give the POS-guided replacements."""

  def __init__(self, config: AugmentConfig, tagger: PosLexicon,
               corpus: Sequence[Sequence[str]]):
    self.config, self.tagger = config, tagger
    counts = collections.Counter(w for words in corpus for w in words if w != MASK)
    by_tag: dict[str, list[str]] = collections.defaultdict(list)
    for word in sorted(counts):
      by_tag[tagger.tag(word)].append(word)
    self._tag_of = {w: tag for tag, words in by_tag.items() for w in words}
    # Per tag: its words and their cumulative unigram probabilities (for searchsorted).
    self._choices = {tag: (words, np.cumsum([counts[w] for w in words]) / sum(
        counts[w] for w in words)) for tag, words in by_tag.items() if len(words) > 1}

  def tag(self, word: str) -> str:
    return self._tag_of.get(word) or self.tagger.tag(word)

  def replace(self, word: str, rng: np.random.Generator) -> str:
    """A word with `word`'s tag, by the training words' unigram frequencies."""
    choices = self._choices.get(self.tag(word))
    if choices is None:
      return word
    words, cumulative = choices
    return words[min(int(np.searchsorted(cumulative, rng.random(), side="right")),
                     len(words) - 1)]

  def augment_sentence(self, words: Sequence[str], rng: np.random.Generator) -> Words:
    """One augmented copy of one sentence (maybe equal to it)."""
    cfg = self.config
    draws = rng.random(len(words))
    out = [MASK if x < cfg.p_mask else self.replace(w, rng) if x < cfg.p_mask + cfg.p_pos else w
           for w, x in zip(words, draws)]
    if out and rng.random() < cfg.p_ngram:
      n = min(int(rng.integers(1, cfg.max_ngram + 1)), len(out))
      start = int(rng.integers(0, len(out) - n + 1))
      out = out[start:start + n]
    return tuple(out)

  def augment(self, example: Sequence[Sequence[str]],
              rng: np.random.Generator) -> list[tuple[Words, ...]]:
    """Up to `copies` distinct augmented copies of an example (each of its sentences
    drawn independently), none equal to it and none with an empty sentence."""
    original = tuple(tuple(words) for words in example)
    seen, copies = {original}, []
    for _ in range(self.config.copies):
      copy = tuple(self.augment_sentence(words, rng) for words in original)
      if all(copy) and copy not in seen:
        seen.add(copy)
        copies.append(copy)
    return copies
