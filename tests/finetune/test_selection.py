"""Evaluation after every epoch and best-epoch selection through Orbax checkpoints."""
import json

import jax
import numpy as np
import pytest

import flax.linen as nn

from bertjax import checkpoints
from bertjax.models.common import task_heads as heads
from bertjax.finetune import loop, selection
from bertjax.objectives import downstream as objectives


class TinyEncoder(nn.Module):
  """The encoder interface at its smallest (compiles in a blink on a busy CPU)."""

  @nn.compact
  def __call__(self, input_ids, attention_mask=None, token_type_ids=None, *,
               deterministic=True, output_hidden_states=False):
    return {"last_hidden_state": nn.Embed(20, 8)(input_ids), "pooler_output": None}


def _arrays(n=12, length=8):
  rng = np.random.default_rng(0)
  ids = rng.integers(5, 20, (n, length)).astype(np.int32)
  return {"input_ids": ids, "attention_mask": np.ones_like(ids),
          "token_type_ids": np.zeros_like(ids), "labels": (ids[:, 0] % 2).astype(np.int32)}


def _tuner(arrays, steps):
  config = loop.FinetuneConfig(batch_size=4, eval_batch_size=4, learning_rate=1e-2,
                               warmup_fraction=0.0, log_every=100)
  return loop.Finetuner(heads.SequenceClassifier(TinyEncoder(), 2, pooling="mean"),
                        objectives.Classification(), arrays, config, steps)


@pytest.mark.parametrize("scores, best_epoch", [([0.5, 0.9, 0.7], 2.0), ([0.5, 0.5, 0.25], 2.0),
                                                ([0.1, 0.2, 0.3], 3.0)])
def test_best_epoch_params_are_restored_and_kept_on_disk(tmp_path, scores, best_epoch):
  arrays = _arrays()
  tuner = _tuner(arrays, steps=9)  # 12 rows / batch 4 = 3 steps per epoch
  seen = []

  def evaluate(t):
    seen.append(jax.tree.map(np.array, t.params))
    value = scores[len(seen) - 1]
    return {"dev": {"accuracy": value, "examples": 3}}, f"outputs of epoch {len(seen)}"

  chosen = selection.fit(tuner, arrays, 9, evaluate, "dev/accuracy", str(tmp_path))
  best_index = int(best_epoch) - 1
  assert [e["epoch"] for e in chosen.epochs] == [1.0, 2.0, 3.0]
  assert [e["step"] for e in chosen.epochs] == [3, 6, 9]
  # Ties go to the later epoch (what Orbax's keep-best keeps).
  assert chosen.best == {"epoch": best_epoch, "step": 3 * int(best_epoch),
                         "value": scores[best_index]}
  assert chosen.outputs == f"outputs of epoch {int(best_epoch)}"
  assert chosen.scores == {"dev": {"accuracy": scores[best_index], "examples": 3}}
  # The finetuner holds the best epoch's params, and only they are on disk.
  jax.tree.map(np.testing.assert_array_equal, jax.tree.map(np.array, tuner.params),
               seen[best_index])
  on_disk, meta = checkpoints.load_params(str(tmp_path))
  assert meta["step"] == 3 * int(best_epoch)
  jax.tree.map(np.testing.assert_array_equal, on_disk, seen[best_index])
  rows = [json.loads(l) for l in (tmp_path / selection.METRICS_FILE).read_text().splitlines()]
  assert [(r["epoch"], r["split"], r["accuracy"]) for r in rows] == [
      (e, "dev", s) for e, s in zip([1.0, 2.0, 3.0], scores)]
  # Training continued through the epochs (the params changed between evaluations).
  assert not all(jax.tree.leaves(jax.tree.map(np.array_equal, seen[0], seen[2])))


def test_fractional_epochs_end_evaluated_and_nan_ranks_last(tmp_path):
  arrays = _arrays()
  tuner = _tuner(arrays, steps=4)  # 1 1/3 epochs
  values = iter([float("nan"), 0.2])
  chosen = selection.fit(tuner, arrays, 4,
                         lambda t: ({"dev": {"pearson": next(values)}}, None),
                         "dev/pearson", str(tmp_path))
  assert [e["epoch"] for e in chosen.epochs] == [1.0, 1.333]
  assert chosen.best["step"] == 4


def test_only_final_evaluation_and_unknown_metric(tmp_path):
  arrays = _arrays()
  calls = []
  chosen = selection.fit(_tuner(arrays, 6), arrays, 6,
                         lambda t: calls.append(1) or ({"dev": {"f1": 0.5}}, None),
                         "dev/f1", str(tmp_path / "a"), each_epoch=False)
  assert len(calls) == 1 and chosen.best["step"] == 6
  with pytest.raises(FileExistsError, match="already holds a fine-tuning run"):
    selection.fit(_tuner(arrays, 6), arrays, 6, lambda t: ({"dev": {"f1": 0.5}}, None),
                  "dev/f1", str(tmp_path / "a"))
  with pytest.raises(ValueError, match="'dev/mcc' is not among the scores"):
    selection.fit(_tuner(arrays, 3), arrays, 3, lambda t: ({"dev": {"f1": 0.5}}, None),
                  "dev/mcc", str(tmp_path / "b"))
