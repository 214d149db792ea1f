"""Shared helpers for the trainer tests: a tiny BERT and a synthetic MLM+NSP stream."""
import os
import subprocess
import sys

import gin
import numpy as np

from bertjax.models import bert
from tests import helpers

VOCAB = 64


def tiny_bert_config(**overrides):
  kw = dict(vocab_size=VOCAB, hidden_size=32, num_layers=2, num_heads=2, intermediate_size=64,
            max_position_embeddings=64)
  kw.update(overrides)
  return bert.BertConfig(**kw)


class SyntheticMlmNsp:
  """A re-iterable, seeded stream of MLM+NSP batches with a learnable pattern.

  Tokens are drawn from a steep Zipf law (a model first learns the unigram, so the
  MLM loss drops within tens of steps); for NSP label 1 the second half is uniform
  noise instead. `nan_at` poisons one training batch with NaN weights.
  """

  def __init__(self, task_name, split, batch_size, sequence_length, seed, shard_id=0,
               num_shards=1, num_batches=None, nan_at=None):
    del task_name
    self.batch_size, self.length = batch_size, sequence_length
    self.seed = seed * 1000 + shard_id * 17 + (0 if split == "train" else 999)
    self.num_batches = num_batches if split == "train" else (num_batches or 4)
    self.nan_at = nan_at if split == "train" else None

  def __iter__(self):
    rng = np.random.default_rng(self.seed)
    i = 0
    while self.num_batches is None or i < self.num_batches:
      batch = self._batch(rng)
      if i == self.nan_at:
        batch["mlm_weights"] = np.full_like(batch["mlm_weights"], np.nan)
      yield batch
      i += 1

  def _batch(self, rng):
    b, l = self.batch_size, self.length
    probs = 1.0 / np.arange(1, VOCAB - 4) ** 1.5
    ids = (rng.choice(VOCAB - 5, size=(b, l), p=probs / probs.sum()) + 5).astype(np.int32)
    nsp = rng.integers(0, 2, b).astype(np.int32)
    half = l // 2
    ids[nsp == 1, half:] = rng.integers(5, VOCAB, (int(nsp.sum()), l - half))
    selected = rng.random((b, l)) < 0.15
    inputs = np.where(selected, 4, ids).astype(np.int32)
    return {
        "input_ids": inputs,
        "attention_mask": np.ones((b, l), np.int32),
        "token_type_ids": (np.arange(l)[None] >= half).repeat(b, 0).astype(np.int32),
        "mlm_targets": np.where(selected, ids, 0).astype(np.int32),
        "mlm_weights": selected.astype(np.float32),
        "next_sentence_label": nsp,
    }


gin.external_configurable(SyntheticMlmNsp, "SyntheticMlmNsp")

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# A whole run in a few seconds: tiny BERT, synthetic data, 1-device-friendly batch.
TINY_RUN = [
    "include 'models/bert_tiny.gin'",
    "include 'objectives/mlm_nsp.gin'",
    "include 'runs/pretrain.gin'",
    "build_model.config_overrides = {'vocab_size': %d, 'hidden_size': 32, 'num_heads': 2, "
    "'intermediate_size': 64, 'max_position_embeddings': 64}" % VOCAB,
    "Trainer.data_fn = @SyntheticMlmNsp",
    "Trainer.train_task = 'synthetic'",
    "Trainer.num_train_steps = 20",
    "Trainer.batch_size = 8",
    "Trainer.sequence_length = 16",
    "Trainer.log_every = 5",
    "Trainer.checkpoint_every = 10",
    "Trainer.eval_every = 0",
    "Trainer.eval_steps = 2",
    "Trainer.show_progress = False",
    "warmup_linear_decay.peak_value = 1e-3",
    "warmup_linear_decay.warmup_steps = 5",
]


def configure(*extra):
  """Parses the tiny run config (+ extra bindings) in this process."""
  from bertjax import main
  gin.clear_config()
  main.parse_gin([], TINY_RUN + list(extra))


def metrics(model_dir, split="train"):
  from bertjax.train import metrics as metrics_writer
  return [r for r in metrics_writer.read_metrics(model_dir) if r["split"] == split]


def write_gin(path, extra=()):
  with open(path, "w") as f:
    f.write("\n".join(TINY_RUN + list(extra)) + "\n")
  return path


def popen_main(gin_file, model_dir, devices=1, **kwargs):
  """`python -m bertjax.main` with the synthetic data registered, as a subprocess (its
  logs quiet, as a user's run: absl's INFO logs of a long run would fill the pipe, which
  nobody reads until `communicate`, and stall the run)."""
  env = dict(os.environ, XLA_FLAGS=helpers.xla_flags(devices),
             JAX_PLATFORMS="cpu", PYTHONPATH=os.pathsep.join([REPO, os.path.join(REPO, "tests")]))
  cmd = [sys.executable, os.path.abspath(__file__), f"--gin_file={gin_file}",
         f"--model_dir={model_dir}", "--mode=train"]
  return subprocess.Popen(cmd, env=env, cwd=REPO, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, **kwargs)


if __name__ == "__main__":
  from bertjax import main
  main.command()  # the real entry point: quiet logs, as a user runs it
