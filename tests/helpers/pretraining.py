"""Tiny pretraining runs of the repo's gin recipes on the embedded corpus.

`train(model_dir, gin_files, bindings)` runs `bertjax.main.run` (the code path of
`python -m bertjax.main`) with the recipe's own run / model / objective gin files,
shrunk to a tiny model, a small WordPiece vocabulary trained on the embedded corpus,
and a few dozen steps; it returns the train records of metrics.jsonl.
"""
import functools
import os
import tempfile

import gin
import numpy as np

VOCAB_SIZE = 512
TINY = ("'hidden_size': 32, 'num_layers': 2, 'num_heads': 2, 'intermediate_size': 64, "
        f"'max_position_embeddings': 66, 'vocab_size': {VOCAB_SIZE}")


@functools.lru_cache(maxsize=1)
def vocab_file() -> str:
  """A WordPiece vocabulary of the embedded corpus, trained once and kept in the corpus
  cache (the corpus is deterministic, so the vocabulary is too)."""
  from bertjax.data import corpus, vocab_training
  out = corpus.cache_dir() / f"test_wordpiece_{VOCAB_SIZE}"
  path = out / "vocab.txt"
  if not path.is_file():
    tmp = tempfile.mkdtemp(prefix="tiny_wordpiece_")
    vocab = vocab_training.train_wordpiece(corpus.sentences("train"), VOCAB_SIZE, tmp)
    assert vocab.vocab_size == VOCAB_SIZE, vocab.vocab_size
    out.mkdir(parents=True, exist_ok=True)
    os.replace(os.path.join(tmp, "vocab.txt"), path)
  return str(path)


def run_bindings(steps: int, batch_size: int, length: int) -> list[str]:
  return [
      f"bertjax.data.recipes.registry.default_vocabulary.vocab_file = '{vocab_file()}'",
      # The tiny WordPiece even where the recipe names its family's own vocabulary (RoBERTa's
      # BPE, ALBERT's SentencePiece, SpanBERT's uncased WordPiece): tests/test_gin_configs.py
      # trains the recipes on their real vocabularies.
      "bertjax.train.inputs.task_dataset.vocabulary = None",
      f"Trainer.num_train_steps = {steps}",
      f"Trainer.batch_size = {batch_size}",
      f"Trainer.sequence_length = {length}",
      "Trainer.log_every = 5",
      f"Trainer.checkpoint_every = {steps}",
      "Trainer.keep_checkpoints = 1",
      "Trainer.async_checkpoints = False",
      "Trainer.show_progress = False",
      "warmup_linear_decay.peak_value = 2e-3",
      "warmup_linear_decay.warmup_steps = 5",
  ]


def train(model_dir, gin_files, bindings=(), steps: int = 40, batch_size: int = 16,
          length: int = 32) -> list[dict]:
  from bertjax import main
  from bertjax.train import metrics as metrics_writer
  from bertjax.data import recipes  # noqa: F401  (registers the task configurables)
  gin.clear_config()
  try:
    main.parse_gin(list(gin_files), run_bindings(steps, batch_size, length) + list(bindings))
    main.run(str(model_dir), "train")
  finally:
    gin.clear_config()
  return [r for r in metrics_writer.read_metrics(str(model_dir)) if r["split"] == "train"]


def early_late(records: list[dict], key: str, n: int = 2) -> tuple[float, float]:
  """Mean of `key` over the first and the last `n` logged intervals."""
  values = [r[key] for r in records]
  assert len(values) >= 2 * n, values
  return float(np.mean(values[:n])), float(np.mean(values[-n:]))
