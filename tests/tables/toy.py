"""A toy two-arm table and fake commands that write what each real cell command would, for
the table runner's tests."""
import json
import os

from bertjax.tables import scales
from bertjax.tables.spec import Arm, Table, Task

TASK = Task("sst2", "SST-2 acc", "dev/accuracy")
TABLE = Table("toy", "toy", "Toy table", "A beats B.",
              arms=(Arm("a", "A", ("models/bert_base.gin", "objectives/mlm_nsp.gin")),
                    Arm("b", "B", ("models/bert_base.gin", "objectives/bert_mlm.gin"))),
              tasks=(TASK, Task("rte", "RTE acc", "dev/accuracy")),
              scales={"tiny": scales.tiny(("sst2",), seeds=(0, 1, 2))})
BASELINES = {"unigram": 7.0, "bigram": 5.0, "tokens": 2}
# What each fake fine-tuning run scores: arm a 0.6 / 0.7 / 0.8, arm b 0.5 flat.
SCORES = {"a": (0.6, 0.7, 0.8), "b": (0.5, 0.5, 0.5)}


class FakeCommands:
  """Writes what each real command would (results.json, metrics.jsonl, stats.json)."""

  def __init__(self, fail=(), corpus_tokens=10, mlm_accuracy=0.25, more_metrics=None,
               signals=None):
    self.ran, self.fail, self.corpus_tokens = [], set(fail), corpus_tokens
    self.mlm_accuracy, self.more_metrics = mlm_accuracy, more_metrics or {}
    self.signals = signals or {}  # arm -> word-order eval rows its pretraining logs

  def __call__(self, cell, out, timeout=None):  # the commands take no time
    self.ran.append(cell.key)
    if cell.key in self.fail:
      return 1
    write = lambda name, value: open(os.path.join(cell.directory, name), "w").write(value)
    if cell.kind == "corpus":
      tokens = self.corpus_tokens
      write("stats.json", json.dumps({"size": "tiny", "vocab_size": 600, "train_tokens": tokens,
                                      "validation_tokens": 2,
                                      "parts": {"train": {"c4": {"tokens": tokens}}},
                                      "held_out_cross_entropy": BASELINES}))
    elif cell.kind == "pretrain":
      write("results.json", json.dumps({"step": 2, "eval": {"mlm_accuracy": self.mlm_accuracy,
                                                             "eval_time_s": len(self.ran),
                                                             **self.more_metrics}}))
      row = {"split": "train", "steps_per_sec": 2.0, "tokens_per_sec": 256.0,
             "model_flops_per_sec": 256.0 * 1e6}
      evals = [{"split": "eval", **point} for point in self.signals.get(cell.arm, ())]
      write("metrics.jsonl", "".join(json.dumps(r) + "\n" for r in [row] + evals))
    else:
      write("results.json", json.dumps({"eval": {"dev": {"accuracy":
                                                         SCORES[cell.arm][cell.seed]}}}))
    return 0
