"""Input-pipeline throughput of every registered pretraining Task on this CPU.

  python benchmarks/data_throughput.py [--tasks=roberta_mlm,spanbert] \
      [--sequence_length=128] [--batch_size=32] [--num_batches=20]

Reads the default source (the embedded corpus) with the default vocabulary
(BERT uncased WordPiece) and prints, per task, examples/s and tokens/s
(real, non-padding tokens: encoder plus decoder side) after two warm-up
batches, which absorb tracing and the first fill of the shuffle buffer.
"""
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from absl import app  # pylint: disable=g-import-not-at-top
from absl import flags
from absl import logging

from bertjax.data import recipes

_TASKS = flags.DEFINE_list("tasks", None, "Tasks to measure (default: all registered).")
_LENGTH = flags.DEFINE_integer("sequence_length", 128, "Encoder sequence length.")
_BATCH = flags.DEFINE_integer("batch_size", 32, "Rows per batch.")
_NUM_BATCHES = flags.DEFINE_integer("num_batches", 20, "Timed batches per task.")
_WARMUP = 2


def sequence_length(task: str, length: int):
  if task == "xlnet_plm":  # XLNet also needs the number of predicted tokens.
    return {"input_ids": length, "target_ids": max(1, length // 6)}
  return length


def real_tokens(batch) -> int:
  return int(sum(batch[k].sum() for k in ("attention_mask", "decoder_attention_mask")
                 if k in batch))


def measure(task: str):
  ds = recipes.get_dataset(task, sequence_length=sequence_length(task, _LENGTH.value),
                         batch_size=_BATCH.value, seed=0)
  it = ds.as_numpy_iterator()
  for _ in range(_WARMUP):
    next(it)
  start, tokens = time.perf_counter(), 0
  for _ in range(_NUM_BATCHES.value):
    tokens += real_tokens(next(it))
  seconds = time.perf_counter() - start
  return _NUM_BATCHES.value * _BATCH.value / seconds, tokens / seconds


def main(_):
  logging.set_verbosity(logging.ERROR)
  names = _TASKS.value or recipes.registered()
  print(f"sequence_length={_LENGTH.value} batch_size={_BATCH.value} "
        f"timed_batches={_NUM_BATCHES.value} cpus={os.cpu_count()}")
  print(f"{'task':28s} {'examples/s':>12s} {'tokens/s':>12s}")
  for name in names:
    examples_per_s, tokens_per_s = measure(name)
    print(f"{name:28s} {examples_per_s:12.1f} {tokens_per_s:12.0f}", flush=True)


if __name__ == "__main__":
  app.run(main)
