"""English Wikipedia + Project Gutenberg books, BERT's pretraining mix in miniature, as a
seqio source of cleaned `{'text'}` documents, one sentence per line.

The text is `<data>/pretraining/` (its README): 22,158 Wikipedia articles (48.9M words,
WikiExtractor's output) and 306 books (19.5M words). `wiki_books()` reads it as it is,
streaming (one file at a time per reader), and always in the same order for a seed:

  train       every book, and every article but the held-out ones and those named in
              wikipedia/OVERLAP.tsv (also SQuAD v1.1 dev or WikiText-2 text)
  validation  the held-out articles: those whose page id is a multiple of 100 (222 of
              them, about 1% of the articles), never an OVERLAP one

A document is never split across the two. What the cleaning does (`clean_article`,
`clean_book`; counts in `source.stats`):
  Wikipedia  drops the repeated title line, section headings (a short line ending in '.'
             with no other sentence in it), lines of template residue ('{{', '#if:'),
             sentences holding a math / code placeholder ('formula_3', 'codice_1'); strips
             tags ('<br>', '<poem>'), '[ [update]]' marks and emptied brackets ('(; )').
  Gutenberg  keeps only the text between the licence's START and END lines (a book where
             no START line is found is left out, never read with its licence), joins the
             hard-wrapped lines of each paragraph, drops all-capitals headings ('CHAPTER
             IV.', 'Preface'), '[Illustration]' lines, credits ('Produced by ...') and
             italics underscores.
Both are then cut into sentences (`split_sentences`), one per line. A book is one long
document; it is given out in sections of at most `max_document_sentences` consecutive
sentences (each section a document, never mixing books), and `readers` files are read
round-robin, so that the examples a shuffle buffer holds come from many texts at once.

Size: `python -m bertjax.data.wiki_books --vocabulary=DIR` counts documents, sentences,
words and a vocabulary's tokens per split (the numbers are in docs/data.md).
"""
import collections
import csv
import gzip
import itertools
import os
import re
from typing import Iterable, Iterator, Optional, Sequence

import gin
import numpy as np
import seqio
import tensorflow as tf

from bertjax import paths

PARTS = ("wikipedia", "gutenberg")
HELD_OUT_EVERY = 100  # validation: the articles whose page id divides by this
_DOC_START = re.compile(r'^<doc id="(\d+)"[^>]*title="([^"]*)">$')

# ------------------------------------------------------------------ sentences
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(\u201c\u2018])")


def split_sentences(paragraph: str) -> list[str]:
  """A paragraph cut after terminal punctuation followed by a capital, digit, quote or
  bracket (an abbreviation such as 'Mr. Smith' is cut too: the recipes only need
  sentence-like units)."""
  return [s.strip() for s in _SENTENCE_END.split(paragraph) if s.strip()]


# ------------------------------------------------------------------ Wikipedia
_TAG = re.compile(r"</?[A-Za-z][^<>]{0,80}>")
_UPDATE_MARK = re.compile(r"\[\s*\[update\]\]?")
_EMPTY_BRACKETS = re.compile(r"\(\s*[,;:\u2013-]?\s*\)|\[\s*\]")
_BRACKET_OPENING = re.compile(r"\(\s*[;,]\s*")
_TEMPLATE = re.compile(r"\{\{|\}\}|#if:|#switch:|&rft\.")
_PLACEHOLDER = re.compile(r"\b(?:formula|codice)_\d+\b")
_SPACES = re.compile(r"\s+")


def _is_heading(line: str) -> bool:
  """WikiExtractor keeps section titles as lines such as 'Early life.'"""
  words = line.split()
  return len(words) <= 5 and line.endswith(".") and line.count(".") == 1 and "," not in line


def clean_article(title: str, lines: Iterable[str], stats: collections.Counter) -> str:
  """One WikiExtractor article (the lines between <doc> and </doc>) -> cleaned text, one
  sentence per line ('' when nothing is left)."""
  sentences = []
  for number, line in enumerate(lines):
    line = line.strip()
    if not line or (number == 0 and line == title.strip()):
      continue
    if _TEMPLATE.search(line):
      stats["wikipedia_template_lines"] += 1
      continue
    if _is_heading(line):
      stats["wikipedia_headings"] += 1
      continue
    cleaned = _TAG.sub(" ", _UPDATE_MARK.sub(" ", line))
    cleaned = _BRACKET_OPENING.sub("(", _EMPTY_BRACKETS.sub(" ", cleaned))
    if cleaned != line:
      stats["wikipedia_markup_stripped"] += 1
    for sentence in split_sentences(_SPACES.sub(" ", cleaned)):
      if _PLACEHOLDER.search(sentence):
        stats["wikipedia_placeholder_sentences"] += 1
      else:
        sentences.append(sentence)
  return "\n".join(sentences)


def read_articles(path: str) -> Iterator[tuple[int, str, list[str]]]:
  """(page id, title, lines) of every article of one WikiExtractor file (.gz or not)."""
  opener = gzip.open if path.endswith(".gz") else open
  with opener(path, "rt", encoding="utf-8", errors="replace") as f:
    header, lines = None, []
    for number, raw in enumerate(f, 1):
      line = raw.rstrip("\n")
      if header is None:
        match = _DOC_START.match(line)
        if match:
          header, lines = (int(match.group(1)), match.group(2)), []
        elif line.strip():
          raise ValueError(f"{path}:{number}: text outside a <doc> element; expected "
                           "WikiExtractor's format (<doc id=... title=...> ... </doc>).")
      elif line == "</doc>":
        yield header[0], header[1], lines
        header = None
      else:
        lines.append(line)
    if header is not None:
      raise ValueError(f"{path}: the article {header[0]} ({header[1]!r}) has no </doc>: the "
                       "file is truncated.")


# ------------------------------------------------------------------ Gutenberg
_BOOK_START = re.compile(r"^\*\*\* ?START OF TH(E|IS) PROJECT GUTENBERG|"
                         r"^\*END\*THE SMALL PRINT|^\*+ *SMALL PRINT! FOR __ COMPLETE", re.I)
_BOOK_END = re.compile(r"^\*\*\* ?END OF TH(E|IS) PROJECT GUTENBERG|"
                       r"^End of (the |this )?Project Gutenberg", re.I)
_ILLUSTRATION = re.compile(r"^\[(Illustration|Page|Footnote)[^\]]*\]?$", re.I)
_LICENCE_NOISE = re.compile(r"Project Gutenberg|ELECTRONIC VERSION|^<<|"
                            r"^(Produced|E-?text prepared|Prepared|Transcribed) (by|from)", re.I)


def book_body(lines: Sequence[str]) -> Optional[list[str]]:
  """The lines between the licence's START and END markers; None without a START."""
  starts = [i for i, line in enumerate(lines) if _BOOK_START.search(line)]
  if not starts:
    return None
  body = lines[starts[-1] + 1:]
  ends = [i for i, line in enumerate(body) if _BOOK_END.search(line)]
  return list(body[:ends[0]] if ends else body)


def _is_book_heading(paragraph: str) -> bool:
  """'CHAPTER IV.', 'NINA BALATKA', 'Preface', 'by': capitals only, or a few words with no
  sentence punctuation."""
  letters = [c for c in paragraph if c.isalpha()]
  words = len(paragraph.split())
  capitals = bool(letters) and all(c.isupper() for c in letters) and words <= 12
  return capitals or (words <= 6 and not re.search(r"[.!?:;\"'\u201d\u2019]", paragraph))


def clean_book(text: str, stats: collections.Counter) -> Optional[str]:
  """A Project Gutenberg file's text -> its body, one sentence per line; None when the
  licence's START line cannot be found."""
  body = book_body(text.splitlines())
  if body is None:
    return None
  sentences = []
  for is_text, group in itertools.groupby(body, key=lambda line: bool(line.strip())):
    if not is_text:
      continue
    paragraph = _SPACES.sub(" ", " ".join(line.strip() for line in group)).strip()
    if _ILLUSTRATION.match(paragraph) or _LICENCE_NOISE.search(paragraph):
      stats["gutenberg_notes_dropped"] += 1
      continue
    if _is_book_heading(paragraph):
      stats["gutenberg_headings"] += 1
      continue
    sentences.extend(split_sentences(paragraph.replace("_", "")))
  return "\n".join(sentences)


# ------------------------------------------------------------------ the corpus
def root() -> str:
  return os.fspath(paths.data_dir() / "pretraining")


def overlap_ids(directory: Optional[str] = None) -> frozenset:
  """Page ids of the articles that are also evaluation text (wikipedia/OVERLAP.tsv)."""
  path = os.path.join(directory or root(), "wikipedia", "OVERLAP.tsv")
  with open(path, encoding="utf-8", newline="") as f:
    return frozenset(int(row["doc_id"]) for row in csv.DictReader(f, delimiter="\t"))


def is_held_out(page_id: int) -> bool:
  return page_id % HELD_OUT_EVERY == 0


def files(part: str, directory: Optional[str] = None) -> list[str]:
  """The part's files in a fixed order (sorted paths)."""
  if part not in PARTS:
    raise ValueError(f"Unknown wiki_books part {part!r}; use one of {PARTS}.")
  base = os.path.join(directory or root(), part)
  found = sorted(tf.io.gfile.glob(os.path.join(base, "*", "*.gz")))
  if not found:
    raise FileNotFoundError(f"No {part} files under {base}: point BERTJAX_DATA_DIR at the "
                            "shared data folder (it holds pretraining/, see its README).")
  return found


def _sections(text: str, max_sentences: int) -> Iterator[str]:
  sentences = text.split("\n")
  for start in range(0, len(sentences), max_sentences):
    yield "\n".join(sentences[start:start + max_sentences])


def documents(split: str, file_list: Sequence[str], stats: collections.Counter,
              max_document_sentences: int = 256, overlap: frozenset = frozenset()
              ) -> Iterator[str]:
  """The cleaned documents of `split` in `file_list` (each file's in order)."""
  for path in file_list:
    if path.endswith(".txt.gz"):  # a book: train only
      if split != "train":
        continue
      with gzip.open(path, "rt", encoding="utf-8", errors="replace") as f:
        text = clean_book(f.read(), stats)
      if text is None:
        stats["gutenberg_books_without_licence_start"] += 1
        continue
      stats["gutenberg_books"] += 1
      yield from _sections(text, max_document_sentences)
      continue
    for page_id, title, lines in read_articles(path):
      if page_id in overlap:  # never held out either
        stats["wikipedia_overlap_articles_left_out"] += split == "train"
        continue
      if (split == "validation") != is_held_out(page_id):
        continue
      text = clean_article(title, lines, stats)
      if text:
        stats["wikipedia_articles"] += 1
        yield from _sections(text, max_document_sentences)


def round_robin(iterators: Iterable[Iterator[str]], readers: int) -> Iterator[str]:
  """One item of each of up to `readers` iterators in turn; a finished one gives its turn
  to the next iterator. Deterministic."""
  pending = iter(iterators)
  active = collections.deque(itertools.islice(pending, readers))
  while active:
    it = active.popleft()
    item = next(it, None)
    if item is None:
      following = next(pending, None)
      if following is not None:
        active.appendleft(following)
      continue
    yield item
    active.append(it)


class WikiBooksSource(seqio.FunctionDataSource):
  """`wiki_books()`'s source (module docstring); `stats` counts what cleaning dropped."""

  def __init__(self, parts: Sequence[str] = PARTS, directory: Optional[str] = None,
               readers: int = 16, max_document_sentences: int = 256):
    if readers < 1 or max_document_sentences < 1:
      raise ValueError(f"wiki_books: readers={readers}, max_document_sentences="
                       f"{max_document_sentences}; both must be >= 1.")
    self._directory = directory or root()
    self._files = {split: [f for part in parts if split == "train" or part == "wikipedia"
                           for f in files(part, self._directory)]
                   for split in ("train", "validation")}
    self._overlap = overlap_ids(self._directory)
    self._readers, self._max_sentences = readers, max_document_sentences
    self.stats = collections.Counter()
    super().__init__(dataset_fn=self._dataset_fn, splits=("train", "validation"),
                     num_input_examples=None)

  def list_shards(self, split: str) -> Sequence[str]:
    return self._files[split]

  def documents(self, split: str, shuffle_files: bool = False,
                seed: Optional[int] = None) -> Iterator[str]:
    """The split's documents as the dataset gives them (files round-robin)."""
    file_list = list(self._files[split])
    if shuffle_files:
      file_list = [file_list[i] for i in np.random.RandomState(seed).permutation(len(file_list))]
    return round_robin(
        (documents(split, [path], self.stats, self._max_sentences, self._overlap)
         for path in file_list), self._readers)

  def _dataset_fn(self, split: str, shuffle_files: bool, seed: Optional[int] = None):
    return tf.data.Dataset.from_generator(
        lambda: ({"text": d} for d in self.documents(split, shuffle_files, seed)),
        output_signature={"text": tf.TensorSpec([], tf.string)})


@gin.configurable
def wiki_books(parts: Sequence[str] = PARTS, directory: Optional[str] = None,
               readers: int = 16, max_document_sentences: int = 256) -> WikiBooksSource:
  """The Wikipedia + books source (module docstring), e.g. from gin:

    task_dataset.source = @wiki_books()
  """
  return WikiBooksSource(tuple(parts), directory, readers, max_document_sentences)
