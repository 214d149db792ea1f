"""A context-free part-of-speech lexicon learnt from CoNLL-2003's POS column.

No POS tagger model can be downloaded here, but CoNLL-2003's files carry a Penn
Treebank tag for each of their ~200k training tokens (column 2). This lexicon tags a
word by that alone:
  * a word seen in the files: its most frequent tag there (lowercased, ties to the
    tag seen first);
  * otherwise, a number-like word (digits with , . - / :) is CD; else the tag most
    often held by word types ending in the word's longest known suffix (4 letters
    down to 1), counting each CoNLL word type once with its own tag, since unseen
    words resemble rare types more than frequent tokens;
  * otherwise NN.
It tags words out of context (a word has one tag), which is what POS-guided word
replacement (bertjax.data.augment) needs: a word and its replacement share a tag.
"""
import collections
import re
from typing import Iterable

from bertjax.evaluation import conll

DEFAULT_TAG = "NN"
MAX_SUFFIX = 4
_NUMBER = re.compile(r"^[+-]?\d[\d,.\-/:]*$")


class PosLexicon:
  """word -> Penn Treebank tag (`tag`); see the module docstring for the rules."""

  def __init__(self, word_tags: dict[str, str], suffix_tags: dict[str, str]):
    self.word_tags, self.suffix_tags = word_tags, suffix_tags

  @classmethod
  def from_pairs(cls, pairs: Iterable[tuple[str, str]]) -> "PosLexicon":
    """From (word, tag) tokens."""
    counts: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for word, tag in pairs:
      counts[word.lower()][tag] += 1
    word_tags = {w: c.most_common(1)[0][0] for w, c in counts.items()}
    by_suffix: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for word, tag in word_tags.items():
      if word.isalpha():
        for n in range(1, min(MAX_SUFFIX, len(word) - 1) + 1):
          by_suffix[word[-n:]][tag] += 1
    suffix_tags = {s: c.most_common(1)[0][0] for s, c in by_suffix.items()}
    return cls(word_tags, suffix_tags)

  @classmethod
  def from_conll(cls, splits: Iterable[str] = ("train",),
                 data_dir: str | None = None) -> "PosLexicon":
    """From CoNLL-2003's files (`<data>/conll2003/`, the given splits)."""
    return cls.from_pairs(pair for split in splits
                          for pair in read_pos_column(conll.path(split, data_dir)))

  def tag(self, word: str) -> str:
    word = word.lower()
    if word in self.word_tags:
      return self.word_tags[word]
    if _NUMBER.match(word):
      return "CD"
    for n in range(min(MAX_SUFFIX, len(word) - 1), 0, -1):
      if word[-n:] in self.suffix_tags:
        return self.suffix_tags[word[-n:]]
    return DEFAULT_TAG


def read_pos_column(path: str) -> Iterable[tuple[str, str]]:
  """(token, POS) of every token line of a CoNLL-2003 file (`token POS chunk NER`);
  `-DOCSTART-` and blank lines are skipped; a token line without 4 columns is an error
  naming file and line (these files are the reference, not user data)."""
  with open(path, encoding="utf-8") as f:
    for line_no, line in enumerate(f, start=1):
      fields = line.split()
      if not fields or fields[0] == "-DOCSTART-":
        continue
      if len(fields) != 4:
        raise ValueError(f"{path}:{line_no}: expected 4 columns (token POS chunk NER), found "
                         f"{len(fields)}: {line.rstrip()!r}.")
      yield fields[0], fields[1]
