"""C4 (Raffel et al. 2020) as a text source, and a T5-style vocabulary trained on it.

The shared data folder holds a small real slice of C4 en 3.0.1 as a prepared TFDS
dataset (1,000 train / 200 validation documents). `c4_source()` reads it offline
through `sources.TfdsTextSource`; point `directory` at a full prepared C4 to pretrain
on all of it. T5's own SentencePiece model (32,000 pieces + 100 sentinels) is not
available offline, so `c4_sentencepiece()` trains a unigram SentencePiece on the
train split in T5's id layout (<pad>=0, </s>=1, <unk>=2) with 100 extra ids as the
span-corruption sentinels, and caches it. A gin run selects both:

  default_source.source = @c4_source()
  bertjax.train.inputs.task_dataset.vocabulary = @c4_sentencepiece()
  Trainer.train_task = 't5_span_corruption'
"""
import functools
import os
from typing import Optional

import gin

from bertjax import paths

C4_SUBDIR = os.path.join("c4", "tfds_c4_en_3.0.1_minimal")
_configurable = functools.partial(gin.configurable, module="bertjax.data.c4")


def default_directory() -> str:
  return os.path.join(str(paths.data_dir()), C4_SUBDIR)


@_configurable
def c4_source(directory: Optional[str] = None):
  """The prepared TFDS C4 under `directory` (default: the shared data slice)."""
  directory = directory or default_directory()
  if not os.path.exists(os.path.join(directory, "dataset_info.json")):
    raise FileNotFoundError(f"No prepared TFDS C4 at {directory!r} (expected "
                            f"dataset_info.json); check $BERTJAX_DATA_DIR or bind "
                            f"c4_source.directory.")
  return _cached_source(os.path.abspath(directory))


@functools.lru_cache(maxsize=4)
def _cached_source(directory: str):
  from bertjax.data import sources  # Local: TensorFlow Datasets is slow to import.
  return sources.TfdsTextSource(directory)


def documents(split: str = "train", directory: Optional[str] = None,
              limit: Optional[int] = None) -> list[str]:
  """The texts of one split, in file order (for vocabulary training and tests)."""
  ds = c4_source(directory).get_dataset(split=split, shuffle=False)
  if limit is not None:
    ds = ds.take(limit)
  return [ex["text"].decode("utf-8") for ex in ds.as_numpy_iterator()]


@_configurable
def c4_sentencepiece(vocab_size: int = 3996, extra_ids: int = 100,
                     cache_dir: Optional[str] = None, directory: Optional[str] = None):
  """A unigram SentencePiece trained on C4's train split (one line per paragraph), with
  `extra_ids` sentinels on top; built once and reused from `cache_dir` (default:
  <paths.cache_dir()>/c4-spm-<size>). The model's vocab_size must be at least
  `vocab_size + extra_ids` (the trained model may hold slightly fewer pieces).
  """
  from bertjax.data import vocab_training, vocabularies  # pylint: disable=g-import-not-at-top
  cache_dir = cache_dir or str(paths.cache_dir() / f"c4-spm-{vocab_size}")
  model_file = os.path.join(cache_dir, "spiece.model")
  if not os.path.exists(model_file):
    lines = [line for doc in documents("train", directory) for line in doc.split("\n")
             if line.strip()]
    tmp = f"{cache_dir}.tmp{os.getpid()}"
    # Every character is kept (coverage 1.0): "_" is too rare in C4 for the default
    # coverage, but T5's GLUE labels ("not_entailment") need it.
    vocab_training.train_sentencepiece(lines, vocab_size, tmp, control_symbols=(),
                                       character_coverage=1.0)
    os.makedirs(os.path.dirname(cache_dir), exist_ok=True)
    try:
      os.replace(tmp, cache_dir)  # atomic: concurrent builders never see half a vocab
    except OSError:  # another process finished first
      pass
  return _cached_vocabulary(model_file, extra_ids, vocabularies.SentencePieceVocabulary)


@functools.lru_cache(maxsize=8)
def _cached_vocabulary(model_file, extra_ids, cls):
  return cls(model_file, extra_ids=extra_ids)
