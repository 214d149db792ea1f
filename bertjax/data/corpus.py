"""An embedded default corpus: the docstrings and comments of Python's standard library.

Every Python install ships it, so a tiny pretraining run needs no download. Docstrings
are read with `ast` from the stdlib's source files (nothing is imported, so no module
side effects), then blocks of consecutive comment lines, then pydoc's help topics, in
sorted order: for a given Python version
the corpus is identical everywhere. Each docstring is one document holding one
sentence per line (what sentence-pair objectives need); doctest lines are dropped.
Built once (a few seconds) and cached as JSON under `cache_dir()`.
"""
import ast
import hashlib
import json
import os
import pathlib
import re
import sys
import sysconfig
import zlib
from typing import List, Optional, Sequence

import gin
import seqio
import tensorflow as tf

SPLITS = ("train", "validation")
_VERSION = 2  # bump when the extraction rules change, to rebuild caches
_SKIP_DIRS = {"test", "tests", "idle_test", "site-packages", "dist-packages", "__pycache__",
              "lib2to3", "turtledemo", "ensurepip", "config"}
_MIN_DOC_CHARS = 80
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z(\"'`])")


def cache_dir() -> pathlib.Path:
  """$BERTJAX_CACHE_DIR, else ~/.cache/bertjax."""
  env = os.environ.get("BERTJAX_CACHE_DIR")
  return pathlib.Path(env) if env else pathlib.Path.home() / ".cache" / "bertjax"


def _sentences(docstring: str) -> List[str]:
  """Paragraphs re-joined from their wrapped lines, then split into sentences."""
  out = []
  for paragraph in re.split(r"\n\s*\n", docstring):
    lines = [l.strip() for l in paragraph.splitlines()]
    lines = [l for l in lines if l and not l.startswith((">>>", "...", "$ "))]
    text = " ".join(lines)
    out += [s for s in _SENTENCE_END.split(text) if s.strip()]
  return out


def _docstrings(tree: ast.AST):
  for node in ast.walk(tree):
    if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
      doc = ast.get_docstring(node, clean=True)
      if doc:
        yield doc


def _source_files() -> List[pathlib.Path]:
  root = pathlib.Path(sysconfig.get_paths()["stdlib"])
  files = []
  for directory, subdirs, names in os.walk(root):
    subdirs[:] = sorted(d for d in subdirs if d not in _SKIP_DIRS)
    files += [pathlib.Path(directory) / n for n in names if n.endswith(".py")]
  return sorted(files, key=lambda p: p.relative_to(root).as_posix())


def _pydoc_topics() -> List[str]:
  try:
    from pydoc_data import topics  # pylint: disable=g-import-not-at-top
  except ImportError:
    return []
  return [topics.topics[k] for k in sorted(topics.topics)]


def _comment_blocks(source: str):
  """Runs of 2+ full-line comments (no code, no shebang/encoding/pragma lines)."""
  block = []
  for line in source.splitlines() + [""]:
    stripped = line.strip()
    if stripped.startswith("#") and not stripped.startswith(("#!", "# -*-", "# pylint",
                                                              "# type:", "# noqa")):
      block.append(stripped.lstrip("#").strip())
      continue
    if len(block) >= 2:
      yield "\n".join(block)
    block = []


def build_documents() -> List[str]:
  """All documents, in a fixed order (no caching)."""
  texts, comments = [], []
  for path in _source_files():
    try:
      source = path.read_bytes()
      tree = ast.parse(source, filename=str(path))
    except (SyntaxError, ValueError, OSError):
      continue  # a few stdlib files are templates or deliberately broken
    texts += _docstrings(tree)
    comments += _comment_blocks(source.decode("utf-8", errors="replace"))
  texts += comments
  texts += _pydoc_topics()
  documents, seen = [], set()
  for text in texts:
    doc = "\n".join(_sentences(text))
    if len(doc) >= _MIN_DOC_CHARS and doc not in seen:  # many docstrings repeat
      seen.add(doc)
      documents.append(doc)
  return documents


def load_documents(use_cache: bool = True) -> List[str]:
  """The corpus documents, cached per Python version."""
  key = f"stdlib-docstrings-v{_VERSION}-py{sys.version_info[0]}.{sys.version_info[1]}"
  path = cache_dir() / f"{key}-{hashlib.md5(sys.version.encode()).hexdigest()[:8]}.json"
  if use_cache and path.exists():
    with open(path, encoding="utf-8") as f:
      return json.load(f)
  documents = build_documents()
  if use_cache:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    tmp.write_text(json.dumps(documents), encoding="utf-8")
    os.replace(tmp, path)  # atomic, so concurrent builders never see half a file
  return documents


def split_of(document: str, validation_percent: int = 2) -> str:
  """Deterministic split by a checksum of the text (stable under corpus growth)."""
  return "validation" if zlib.crc32(document.encode()) % 100 < validation_percent else "train"


def documents(split: str = "train", validation_percent: int = 2) -> List[str]:
  if split not in SPLITS:
    raise ValueError(f"Unknown split {split!r}; the embedded corpus has {SPLITS}.")
  return [d for d in load_documents() if split_of(d, validation_percent) == split]


def corpus_source(validation_percent: int = 2) -> seqio.DataSource:
  """The corpus as a seqio source of {'text': one document, sentences on lines}."""
  by_split = {s: documents(s, validation_percent) for s in SPLITS}

  def dataset_fn(split: str, shuffle_files: bool, seed: Optional[int] = None):
    ds = tf.data.Dataset.from_tensor_slices({"text": by_split[split]})
    if shuffle_files:
      ds = ds.shuffle(len(by_split[split]), seed=seed, reshuffle_each_iteration=True)
    return ds

  return seqio.FunctionDataSource(
      dataset_fn, splits=SPLITS, num_input_examples={s: len(d) for s, d in by_split.items()})


def sentences(split: str = "train") -> Sequence[str]:
  """Every sentence of a split, e.g. to train a vocabulary."""
  return [s for d in documents(split) for s in d.split("\n")]


@gin.configurable
def corpus_wordpiece(vocab_size: int = 8192, directory: str | None = None):
  """A WordPiece vocabulary trained on the embedded corpus's train split, built once.

  Stored under `directory` (default: the corpus cache) and reused by later runs, so
  the quickstart needs no download and no hand-made vocab file.
  """
  from bertjax.data import hf_vocabulary, vocab_training  # Local: tokenizers is heavy.
  directory = directory or os.path.join(str(cache_dir()), f"wordpiece-{vocab_size}")
  if not os.path.exists(os.path.join(directory, "tokenizer_config.json")):
    tmp = f"{directory}.tmp{os.getpid()}"
    vocab_training.train_wordpiece(sentences("train"), vocab_size, tmp)
    os.makedirs(os.path.dirname(directory), exist_ok=True)
    try:
      os.replace(tmp, directory)  # atomic: concurrent builders never see half a vocab
    except OSError:  # another process finished first
      pass
  return hf_vocabulary.vocab_from_hf(directory)
