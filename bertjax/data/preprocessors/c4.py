"""C4's cleaning rules for raw web pages, as python functions and a seqio preprocessor.

The rules of the C4 paper (Raffel et al. 2020, sec. 2.2), applied in this order:
  line level: drop lines with a word over `max_word_length` characters; strip
    Wikipedia-style citation marks ([1], [edit], [citation needed]); drop lines not
    ending in terminal punctuation (. ? ! ") or ending in "..."; drop lines with fewer
    than `min_words_per_line` words; drop lines mentioning javascript; drop
    policy/cookie lines.
  page level: drop the page if any kept line has "lorem ipsum" or a curly brace, or if
    fewer than `min_sentences` sentences remain; drop pages with a word from the
    bad-words list (a file, one word per line; none ships); drop pages langdetect does
    not call English with probability >= `english_min_probability`.
  corpus level: drop every 3-sentence span already seen on an earlier page (the
    paper's dedupe; the first occurrence is kept), and exact duplicate lines; pages
    left with too few sentences are dropped.
Every removal is counted in `C4Cleaner.stats` under tensorflow_datasets' counter names
(e.g. 'line-filtered:no_endmark', 'filtered:squigglybracket'), so counts compare
directly with TFDS's own C4 pipeline.

Sentences are counted with a punctuation rule (`split_sentences`) instead of NLTK's
punkt model, which would need a download.
"""
import collections
import dataclasses
import hashlib
import re
import threading
from typing import Iterator, List, Optional, Sequence, Tuple

from absl import logging
import tensorflow as tf

POLICY_SUBSTRINGS = ("terms of use", "privacy policy", "cookie policy", "uses cookies",
                     "use of cookies", "use cookies")
_CITATION = re.compile(r"\[\d*\]|\[edit\]|\[citation needed\]")
_SENTENCE_BOUNDARY = re.compile(r"(?<=[.!?])[\"')\]]*\s+(?=\S)")
_langdetect_lock = threading.Lock()  # langdetect's factory is global and not thread-safe


@dataclasses.dataclass(frozen=True)
class C4Config:
  min_words_per_line: int = 5
  min_sentences: int = 3
  max_word_length: int = 1000
  end_marks: Tuple[str, ...] = (".", "?", "!", '"')
  policy_substrings: Tuple[str, ...] = POLICY_SUBSTRINGS
  badwords_file: Optional[str] = None  # one word per line; None: no bad-words filter
  english_min_probability: Optional[float] = 0.99  # None: no language filter
  dedupe_span_sentences: int = 3  # 0: no span dedupe
  dedupe_lines: bool = True


def split_sentences(text: str) -> List[str]:
  """Sentences: split after . ! ? (and closing quotes/brackets) followed by space."""
  return [s for s in _SENTENCE_BOUNDARY.split(text.strip()) if s]


def clean_page(text: str, config: C4Config = C4Config(),
               stats: Optional[collections.Counter] = None) -> Optional[str]:
  """The line-level rules and the lorem-ipsum / curly-brace / sentence-count page rules."""
  stats = collections.Counter() if stats is None else stats
  kept, num_sentences = [], 0
  for line in text.splitlines():
    line = line.strip()
    if any(len(word) > config.max_word_length for word in line.split()):
      stats["line-filtered:too_long_word"] += 1
      continue
    line = _CITATION.sub("", line)
    if not line.endswith(config.end_marks) or line.endswith("..."):
      stats["line-filtered:no_endmark"] += 1
      continue
    if len(line.split()) < config.min_words_per_line:
      stats["line-filtered:too_short"] += 1
      continue
    lower = line.lower()
    if "lorem ipsum" in lower:  # placeholder text: the whole page goes
      stats["filtered:loremipsum"] += 1
      return None
    if "javascript" in lower:
      stats["line-filtered:javascript"] += 1
      continue
    if "{" in line:  # most likely code: the whole page goes
      stats["filtered:squigglybracket"] += 1
      return None
    if any(p in lower for p in config.policy_substrings):
      stats["line-filtered:policy"] += 1
      continue
    num_sentences += len(split_sentences(line))
    kept.append(line)
    stats["line-passed"] += 1
  if num_sentences < config.min_sentences:
    stats["filtered:too_few_sentences"] += 1
    return None
  return "\n".join(kept).strip()


def badwords_regex(words: Sequence[str]) -> Optional["re.Pattern"]:
  """Whole-word matcher (as C4's: the word flanked by non-word characters or ends)."""
  words = [w.strip().lower() for w in words if w.strip()]
  if not words:
    return None
  return re.compile(r"(?:\W|^)({})(?:\W|$)".format("|".join(map(re.escape, words))))


def load_badwords(path: str) -> Optional["re.Pattern"]:
  with tf.io.gfile.GFile(path) as f:
    return badwords_regex(f.read().splitlines())


def english_probability(text: str) -> Optional[float]:
  """langdetect's probability that `text` is English (None if it cannot tell)."""
  import langdetect  # pylint: disable=g-import-not-at-top  (optional, slow to import)
  with _langdetect_lock:
    langdetect.DetectorFactory.seed = 0  # deterministic predictions
    try:
      predictions = langdetect.detect_langs(text)
    except langdetect.lang_detect_exception.LangDetectException:
      return None
  if not predictions:
    return None
  best = predictions[0]
  return best.prob if best.lang == "en" else 0.0


def _key(text: str) -> str:
  return hashlib.md5(" ".join(text.lower().split()).encode("utf-8")).hexdigest()


class C4Cleaner:
  """All C4 rules over a stream of pages; keeps dedupe state and counters.

  `cleaner(text)` returns the cleaned page or None. Use `cleaner.preprocessor` as a
  seqio preprocessor (it maps a dataset's 'text' and drops rejected pages).
  """

  def __init__(self, config: C4Config = C4Config()):
    self.config = config
    self.stats = collections.Counter()
    self._badwords = load_badwords(config.badwords_file) if config.badwords_file else None
    self._seen_spans = set()
    self._seen_lines = set()
    self._lock = threading.Lock()

  def __call__(self, text: str) -> Optional[str]:
    with self._lock:  # tf.data may call from several threads; dedupe state is shared
      result = self._clean(text)
    self.stats["passed" if result is not None else "rejected"] += 1
    return result

  def _clean(self, text: str) -> Optional[str]:
    stats = self.stats
    text = clean_page(text, self.config, stats)
    if text is None:
      return None
    if self._badwords is not None and self._badwords.search(text.lower()):
      stats["filtered:badwords"] += 1
      return None
    if self.config.english_min_probability is not None:
      probability = english_probability(text)
      if probability is None or probability < self.config.english_min_probability:
        stats["filtered:not_english" if probability is not None
              else "filtered:langdetect_exception"] += 1
        return None
    if self.config.dedupe_lines:
      text = self.remove_duplicate_lines(text)
    if self.config.dedupe_span_sentences:
      text = self.remove_duplicate_spans(text)
    if not text:
      stats["filtered:empty"] += 1
      return None
    if len(split_sentences(text.replace("\n", " "))) < self.config.min_sentences:
      stats["filtered:too_few_sentences_after_dedupe"] += 1
      return None
    return text

  def remove_duplicate_lines(self, text: str) -> str:
    """Drops lines (case/whitespace-insensitive) seen on an earlier page or this one."""
    kept, local = [], set()
    for line in text.split("\n"):
      key = _key(line)
      if key in self._seen_lines and key not in local:
        self.stats["line-filtered:global_duplicate"] += 1
      elif key in local:
        self.stats["line-filtered:local_duplicate"] += 1
      else:
        kept.append(line)
      local.add(key)
    self._seen_lines |= local
    return "\n".join(kept)

  def remove_duplicate_spans(self, text: str) -> str:
    """Drops the sentences of every n-sentence span an earlier page already had."""
    n = self.config.dedupe_span_sentences
    sentences = [(i, s) for i, line in enumerate(text.split("\n"))
                 for s in split_sentences(line)]
    keys = [_key(" ".join(s for _, s in sentences[j:j + n]))
            for j in range(len(sentences) - n + 1)]
    drop = set()
    for j, key in enumerate(keys):
      if key in self._seen_spans:
        drop.update(range(j, j + n))
    self._seen_spans.update(keys)
    if drop:
      self.stats["sentence-filtered:duplicate_span"] += len(drop)
    lines = collections.defaultdict(list)
    for j, (i, sentence) in enumerate(sentences):
      if j not in drop:
        lines[i].append(sentence)
    return "\n".join(" ".join(lines[i]) for i in sorted(lines))

  def _clean_np(self, text: bytes):
    result = self(text.decode("utf-8", errors="replace"))
    return (result or "").encode("utf-8"), result is not None

  def preprocessor(self, dataset: tf.data.Dataset, text_key: str = "text") -> tf.data.Dataset:
    def clean(ex):
      text, keep = tf.numpy_function(self._clean_np, [ex[text_key]], [tf.string, tf.bool],
                                     stateful=True)
      return {**ex, text_key: tf.ensure_shape(text, [])}, tf.ensure_shape(keep, [])

    def kept(ex, keep):
      del ex
      return keep

    def drop_flag(ex, keep):
      del keep
      return ex

    return dataset.map(clean).filter(kept).map(drop_flag)

  def log_summary(self):
    logging.info("C4 cleaning: %s", dict(self.stats))


def clean_c4(dataset: tf.data.Dataset, config: C4Config = C4Config(),
             text_key: str = "text") -> tf.data.Dataset:
  """seqio preprocessor: C4-clean `text_key`, dropping rejected pages (fresh state)."""
  return C4Cleaner(config).preprocessor(dataset, text_key)


def split_wet(text: str) -> Iterator[dict]:
  """Pages of a Common Crawl WET file: {'url', 'timestamp', 'text'} (records w/o URL skipped)."""
  for record in re.split(r"(?m)^WARC/1\.0\s*$", text):
    header, _, body = record.partition("\n\n")
    fields = dict(line.split(": ", 1) for line in header.strip().splitlines() if ": " in line)
    url, body = fields.get("WARC-Target-URI", ""), body.strip()
    if url and body:
      yield {"url": url, "timestamp": fields.get("WARC-Date", ""),
             "text": "\n".join(l.strip() for l in body.splitlines() if l.strip())}
