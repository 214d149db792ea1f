"""Evaluation after every epoch and best-epoch selection through Orbax checkpoints."""
import json
import os

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


def _tuner(arrays, steps, dropout_rate=0.1, **config):
  config = loop.FinetuneConfig(**{**dict(batch_size=4, eval_batch_size=4, learning_rate=1e-2,
                                         warmup_fraction=0.0, log_every=100), **config})
  model = heads.SequenceClassifier(TinyEncoder(), 2, pooling="mean", dropout_rate=dropout_rate)
  return loop.Finetuner(model, objectives.Classification(), arrays, config, steps)


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
  assert [(r["epoch"], r["split"], r["accuracy"]) for r in rows if r["split"] != "train"] == [
      (e, "dev", s) for e, s in zip([1.0, 2.0, 3.0], scores)]
  # The train rows are the trainer's, flushed (and checked) before every evaluation.
  train = [r for r in rows if r["split"] == "train"]
  assert [r["step"] for r in train] == [3, 6, 9]
  for row in train:
    assert np.isfinite(row["loss"]) and row["grad_norm"] > 0 and row["nonfinite"] == 0
    # The mean over the row's 3 steps s of the rate they used, 1e-2 (1 - s / 9).
    assert row["learning_rate"] == pytest.approx(1e-2 * (1 - (row["step"] - 2) / 9))
  for split in ("train", "dev"):
    assert os.listdir(tmp_path / "tensorboard" / split)
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


def test_skipped_nonfinite_updates_leave_a_finite_model_to_select(tmp_path):
  arrays = _arrays()
  # lr 1e6 overflows the weights within a few steps; 'skip' drops every such update.
  tuner = _tuner(arrays, 9, learning_rate=1e6, on_nonfinite="skip", log_every=1)
  seen = []

  def evaluate(t):
    seen.append(jax.tree.map(np.array, t.params))
    return {"dev": {"accuracy": 0.5}}, None

  selection.fit(tuner, arrays, 9, evaluate, "dev/accuracy", str(tmp_path), tensorboard=False)
  rows = [json.loads(l) for l in (tmp_path / selection.METRICS_FILE).read_text().splitlines()]
  skipped = [r["step"] for r in rows if r["split"] == "train" and r["nonfinite"] > 0]
  assert skipped and skipped[-1] == 9
  assert not (tmp_path / "tensorboard").exists()
  on_disk, _ = checkpoints.load_params(str(tmp_path))
  for params in seen + [on_disk, jax.device_get(tuner.params)]:
    assert all(np.isfinite(p).all() for p in jax.tree.leaves(params))


def test_microbatched_finetuning_matches_whole_batches():
  arrays = _arrays()
  runs = {}
  for n in (1, 2):
    tuner = _tuner(arrays, 3, dropout_rate=0.0, num_microbatches=n, log_every=1)
    history = tuner.train(arrays, 3)
    runs[n] = history, jax.device_get(tuner.params)
  for name in ("loss", "accuracy", "grad_norm", "learning_rate", "nonfinite"):
    np.testing.assert_allclose([r[name] for r in runs[2][0]], [r[name] for r in runs[1][0]],
                               rtol=1e-5, err_msg=name)
  jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-7),
               runs[2][1], runs[1][1])


def test_config_rejects_bad_nonfinite_mode_and_microbatches():
  with pytest.raises(ValueError, match="FinetuneConfig.on_nonfinite = 'ignore'"):
    loop.FinetuneConfig(on_nonfinite="ignore")
  with pytest.raises(ValueError, match="num_microbatches = 3: .*batch_size = 32"):
    loop.FinetuneConfig(num_microbatches=3)
