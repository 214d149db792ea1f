"""seqio DataSources that yield {'text': tf.string, ...} from local files or TFDS.

Bad input never crashes a run; it is handled by stated rules, counted in the source's
`stats` (a collections.Counter the tests read) and logged with absl:
  * invalid UTF-8: decoded with U+FFFD replacement           -> stats['invalid_utf8']
  * empty documents (whitespace only): skipped               -> stats['empty_documents']
  * lines longer than `max_line_chars`: truncated            -> stats['long_lines_truncated']
  * jsonl rows that do not parse / lack a string text field,
    tsv rows without the text column: skipped                -> stats['bad_rows']
  * documents read                                           -> stats['documents']
"""
import collections
import csv
import gzip
import json
import os
import zlib
from typing import Iterator, Mapping, Optional, Sequence, Union

from absl import logging
import gin
import numpy as np
import seqio
import tensorflow as tf
import tensorflow_datasets as tfds

from bertjax.data import corpus

FilePatterns = Union[str, Sequence[str]]
FORMATS = ("text", "jsonl", "tsv")
DOC_BOUNDARIES = ("line", "blank_line")


class _Stats:
  """A Counter plus absl logging of the first occurrence of each problem (quiet: none)."""

  def __init__(self, name: str, quiet: bool = False):
    self.name = name
    self.counter = collections.Counter()
    self.quiet = quiet

  def count(self, key: str, where: str = ""):
    if key != "documents" and not self.counter[key] and not self.quiet:
      logging.warning("%s: %s (first at %s); counting further cases in stats.",
                      self.name, key, where or "?")
    self.counter[key] += 1

  def log_summary(self):
    if not self.quiet:
      logging.info("%s: %s", self.name, dict(self.counter))


def _open(path: str):
  return gzip.open(path, "rb") if path.endswith(".gz") else open(path, "rb")


def _numbered(f, path: str) -> Iterator[tuple[int, bytes]]:
  """(line number, raw line) of an open file; a truncated or corrupt gzip file fails here,
  naming the file and the line it stopped at."""
  number = 0
  try:
    for number, raw in enumerate(f, 1):
      yield number, raw
  except (EOFError, OSError, zlib.error) as e:
    raise ValueError(f"{path} is truncated or corrupt ({type(e).__name__}: {e}) after line "
                     f"{number}; re-create the file (gzip -t checks one).") from None


def _expand(patterns: FilePatterns) -> list:
  patterns = [patterns] if isinstance(patterns, (str, os.PathLike)) else patterns
  files = sorted({f for p in patterns for f in tf.io.gfile.glob(os.fspath(p))})
  if not files:
    raise FileNotFoundError(f"No files match {patterns!r}.")
  return files


class TextFileSource(seqio.FunctionDataSource):
  """Local text / jsonl(.gz) / tsv(.gz) files as a seqio source of {'text', ...}.

  Args:
    split_to_filepattern: split name -> glob pattern(s).
    file_format: 'text' (documents are lines or blank-line separated blocks, see
      `doc_boundary`), 'jsonl' (one JSON object per line, `text_field` holds the text)
      or 'tsv' (a header row names the columns unless `tsv_columns` is given).
    text_field: the jsonl key / tsv column holding the text.
    extra_fields: further jsonl keys / tsv columns passed through as strings
      (missing ones become '').
    max_line_chars: longer lines are cut to this many characters.
  """

  def __init__(self, split_to_filepattern: Mapping[str, FilePatterns],
               file_format: str = "text", doc_boundary: str = "line",
               text_field: str = "text", extra_fields: Sequence[str] = (),
               tsv_columns: Optional[Sequence[str]] = None,
               max_line_chars: int = 100_000,
               num_input_examples: Optional[Mapping[str, int]] = None):
    if file_format not in FORMATS:
      raise ValueError(f"file_format {file_format!r} is not one of {FORMATS}.")
    if doc_boundary not in DOC_BOUNDARIES:
      raise ValueError(f"doc_boundary {doc_boundary!r} is not one of {DOC_BOUNDARIES}.")
    self._patterns = dict(split_to_filepattern)
    self._format = file_format
    self._boundary = doc_boundary
    self._text_field = text_field
    self._extra_fields = tuple(extra_fields)
    self._tsv_columns = tsv_columns
    self._max_line_chars = max_line_chars
    self._stats = _Stats(f"TextFileSource({file_format})")
    super().__init__(self._dataset_fn, splits=list(self._patterns),
                     num_input_examples=num_input_examples)

  @property
  def stats(self) -> collections.Counter:
    return self._stats.counter

  def list_shards(self, split: str) -> Sequence[str]:
    return _expand(self._patterns[split])

  def _dataset_fn(self, split: str, shuffle_files: bool, seed: Optional[int] = None):
    files = self.list_shards(split)
    self._require_documents(split, files)
    if shuffle_files:
      files = list(np.random.RandomState(seed).permutation(files))
    signature = {k: tf.TensorSpec([], tf.string)
                 for k in ("text",) + self._extra_fields}
    return tf.data.Dataset.from_generator(lambda: self._examples(files, self._stats),
                                          output_signature=signature)

  def _require_documents(self, split: str, files: Sequence[str]) -> None:
    """Reads up to the first document, so that a split left empty by the rules above
    fails here, naming its files, rather than as an empty dataset deep in a run."""
    probe = _Stats(self._stats.name, quiet=True)
    if next(self._examples(files, probe), None) is None:
      dropped = ", ".join(f"{n} {k.replace('_', ' ')}" for k, n in sorted(probe.counter.items()))
      raise ValueError(
          f"{self._stats.name}: split {split!r} has no documents after filtering "
          f"({dropped or 'the files hold no text'}) in {list(files)}. Point "
          f"split_to_filepattern[{split!r}] at files with text (file_format={self._format!r}"
          + (f", text_field={self._text_field!r}" if self._format != "text" else "") + ").")

  def _lines(self, path: str, stats: _Stats) -> Iterator[str]:
    with _open(path) as f:
      for number, raw in _numbered(f, path):
        where = f"{path}:{number}"
        try:
          line = raw.decode("utf-8")
        except UnicodeDecodeError:
          stats.count("invalid_utf8", where)
          line = raw.decode("utf-8", errors="replace")
        line = line.rstrip("\r\n")
        if len(line) > self._max_line_chars:
          stats.count("long_lines_truncated", where)
          line = line[:self._max_line_chars]
        yield line, where

  def _records(self, path: str, stats: _Stats) -> Iterator[tuple]:
    """(fields dict, location) per document of one file."""
    if self._format == "text":
      block = []
      for line, where in self._lines(path, stats):
        if self._boundary == "line":
          yield {"text": line}, where
        elif line.strip():
          block.append(line)
        elif block:
          yield {"text": "\n".join(block)}, where
          block = []
      if block:
        yield {"text": "\n".join(block)}, path
    elif self._format == "jsonl":
      for line, where in self._lines(path, stats):
        if not line.strip():
          continue
        try:
          row = json.loads(line)
        except json.JSONDecodeError:
          row = None
        if not isinstance(row, dict) or not isinstance(row.get(self._text_field), str):
          stats.count("bad_rows", where)
          continue
        yield {"text": row[self._text_field],
               **{k: "" if row.get(k) is None else str(row[k])
                  for k in self._extra_fields}}, where
    else:
      columns = self._tsv_columns
      lines = self._lines(path, stats)
      if columns is None:
        header = next(lines, ("", path))[0]
        columns = [c.lstrip("\ufeff") for c in header.split("\t")]
      for line, where in lines:
        values = next(csv.reader([line], delimiter="\t", quoting=csv.QUOTE_NONE))
        row = dict(zip(columns, values))
        if self._text_field not in row:
          stats.count("bad_rows", where)
          continue
        yield {"text": row[self._text_field],
               **{k: row.get(k, "") for k in self._extra_fields}}, where

  def _examples(self, files: Sequence[str], stats: _Stats) -> Iterator[dict]:
    for path in files:
      for fields, where in self._records(path, stats):
        text = fields["text"]
        if not text.strip():
          stats.count("empty_documents", where)
          continue
        stats.count("documents")
        yield {"text": text, **{k: fields[k] for k in self._extra_fields}}
      stats.log_summary()


class TfdsTextSource(seqio.FunctionDataSource):
  """A prepared TFDS dataset (no download) as a source of {'text', ...}.

  `name_or_dir` is either a registered name such as 'c4/en:3.0.1', 'wikipedia/
  20230601.en' or 'glue/cola' found under `data_dir` (TFDS's usual layout), or the
  directory of one prepared dataset (with dataset_info.json), read through
  tfds.builder_from_directory. `text_feature` is renamed to 'text'; string features
  in `extra_fields` are kept. Invalid UTF-8 is replaced and empty texts are dropped,
  counted in `stats` (python-side counters, so such a pipeline is not serialisable
  for tf.data service).
  """

  def __init__(self, name_or_dir: str, data_dir: Optional[str] = None,
               text_feature: str = "text", extra_fields: Sequence[str] = ()):
    self._name_or_dir = os.fspath(name_or_dir)
    self._data_dir = data_dir
    self._text_feature = text_feature
    self._extra_fields = tuple(extra_fields)
    self._stats = _Stats(f"TfdsTextSource({self._name_or_dir})")
    info = self.builder.info
    super().__init__(self._dataset_fn, splits=list(info.splits),
                     num_input_examples={k: v.num_examples for k, v in info.splits.items()})

  @property
  def builder(self):
    if tf.io.gfile.exists(os.path.join(self._name_or_dir, "dataset_info.json")):
      return tfds.builder_from_directory(self._name_or_dir)
    if not self._data_dir:
      raise ValueError(f"TfdsTextSource({self._name_or_dir!r}) needs data_dir (the TFDS "
                       "data folder), or a path to a prepared dataset directory.")
    return tfds.builder(self._name_or_dir, data_dir=self._data_dir)

  @property
  def stats(self) -> collections.Counter:
    return self._stats.counter

  def _tally(self, invalid, empty):
    if invalid:
      self._stats.count("invalid_utf8", self._name_or_dir)
    if empty:
      self._stats.count("empty_documents", self._name_or_dir)
    else:
      self._stats.count("documents")
    return not empty

  def _dataset_fn(self, split: str, shuffle_files: bool, seed: Optional[int] = None):
    read_config = tfds.ReadConfig(shuffle_seed=seed)
    ds = self.builder.as_dataset(split=split, shuffle_files=shuffle_files,
                                 read_config=read_config)

    def clean(ex):
      raw = ex[self._text_feature]
      text = tf.strings.unicode_transcode(raw, "UTF-8", "UTF-8", errors="replace")
      out = {"text": text, **{k: ex[k] for k in self._extra_fields}}
      return out, tf.not_equal(text, raw), tf.equal(tf.strings.strip(text), "")

    def keep(ex, invalid, empty):
      del ex
      return tf.ensure_shape(
          tf.py_function(self._tally, [invalid, empty], tf.bool), [])

    return (ds.map(clean, num_parallel_calls=tf.data.AUTOTUNE)
            .filter(keep).map(lambda ex, *_: ex))


def tfds_source(name: str, data_dir: Optional[str] = None, **kwargs) -> seqio.DataSource:
  """seqio's own TfdsDataSource for registered datasets without cleaning needs, else ours."""
  if not kwargs and data_dir and not os.path.isdir(name):
    return seqio.TfdsDataSource(tfds_name=name, tfds_data_dir=data_dir)
  return TfdsTextSource(name, data_dir, **kwargs)


@gin.configurable
def text_files(train: FilePatterns = gin.REQUIRED, validation: Optional[FilePatterns] = None,
               file_format: str = "text", doc_boundary: str = "blank_line") -> TextFileSource:
  """A TextFileSource from gin: `default_source.source = @text_files()` with
  `text_files.train = '/path/train.txt'` (and `validation`) pretrains on local files."""
  splits = {"train": train} if validation is None else {"train": train,
                                                         "validation": validation}
  for split, pattern in splits.items():
    try:
      _expand(pattern)
    except FileNotFoundError as e:
      raise FileNotFoundError(f"gin text_files.{split}: {e}") from None
  return TextFileSource(splits, file_format=file_format, doc_boundary=doc_boundary)


@gin.configurable
def default_source(source: Optional[seqio.DataSource] = None) -> seqio.DataSource:
  """The documents Tasks read unless given a source: gin-bind `source`, or the
  embedded default corpus (bertjax.data.corpus)."""
  if source is not None:
    return source
  return corpus.corpus_source()
