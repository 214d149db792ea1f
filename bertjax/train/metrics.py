"""Where a run's numbers go: TensorBoard, a JSONL log, the console, and a loss curve.

Pretraining, fine-tuning and SBERT training all write through `MetricsWriter`, so
their `metrics.jsonl` rows share one layout: `split`, `step`, `time` and the values.
Only process 0 writes (on a pod every host computes the same global metrics).
`metrics.jsonl` in model_dir is append-only across restarts, so the loss curve drawn
at the end of a resumed run covers the whole run.
"""
import json
import os
import time
from typing import Any, Mapping

import jax
import numpy as np

from bertjax import progress

METRICS_FILE = "metrics.jsonl"
CURVE_FILE = "loss_curve.png"
TB_SUBDIR = "tensorboard"


def reduce_metrics(summed: Mapping[str, tuple[Any, Any]]) -> dict[str, float]:
  """{name: (sum, count)} -> {name: sum / count} as Python floats."""
  out = {}
  for name, (total, count) in summed.items():
    total, count = float(total), float(count)
    out[name] = total / count if count else float("nan")
  return out


def sum_metrics(a: Mapping | None, b: Mapping) -> dict:
  """Adds two {name: (sum, count)} dicts (either may be device or host values)."""
  if a is None:
    return dict(b)
  return {k: (a[k][0] + b[k][0], a[k][1] + b[k][1]) for k in b}


def format_scalars(scalars: Mapping[str, Any]) -> str:
  """'a=1, b=0.5' over the numbers among `scalars`, sorted by name."""
  return ", ".join(f"{k}={v:.4g}" for k, v in sorted(scalars.items())
                   if isinstance(v, (int, float)))


class MetricsWriter:
  """TensorBoard event files (one folder per split), metrics.jsonl, and a progress bar
  (`bertjax.progress`).

  With `model_dir=None` nothing is written to disk (only `print` and the bar work);
  `tensorboard=False` keeps metrics.jsonl but skips the event files (and TensorFlow).
  `show_progress=None` shows the bar when stderr is a terminal (not in a log file).
  The bar moves as steps finish (`advance`), names what runs between steps (`phase`:
  "compiling", "evaluating", "writing checkpoint 200") and leaves those out of its ETA.
  """

  def __init__(self, model_dir: str | None, total_steps: int, start_step: int = 0,
               show_progress: bool | None = True, tensorboard: bool = True,
               desc: str = "train"):
    self.enabled = jax.process_index() == 0
    self.model_dir = model_dir
    self.tensorboard = tensorboard
    self._writers = {}
    self._jsonl = None
    self._progress = progress.Progress(0, show=False)
    if not self.enabled:
      return
    if model_dir is not None:
      os.makedirs(model_dir, exist_ok=True)
      self._jsonl = open(os.path.join(model_dir, METRICS_FILE), "a")
    self._progress = progress.Progress(total_steps, start_step, desc, "step", show_progress)

  def _tb(self, split: str):
    if split not in self._writers:
      from clu import metric_writers  # Imports TensorFlow; only on the writing process.
      self._writers[split] = metric_writers.SummaryWriter(
          os.path.join(self.model_dir, TB_SUBDIR, split))
    return self._writers[split]

  def write(self, split: str, step: int, scalars: Mapping[str, float],
            extra: Mapping[str, Any] | None = None) -> None:
    """One row of `scalars` (also to TensorBoard); `extra` JSON values join the row only."""
    if self._jsonl is None:
      return
    scalars = {k: float(v) for k, v in scalars.items()}
    if self.tensorboard:
      self._tb(split).write_scalars(step, scalars)
      self._tb(split).flush()
    row = {"split": split, "step": step, "time": time.time(), **scalars, **(extra or {})}
    self._jsonl.write(json.dumps(row, default=float) + "\n")
    self._jsonl.flush()

  def advance(self, step: int, postfix: Mapping[str, float] | None = None) -> None:
    """Moves the progress bar to `step` (its ETA comes from the step rate)."""
    self._progress.advance(step, postfix)

  def phase(self, name: str):
    """Names what runs meanwhile on the bar ("train (compiling)"); its time is left out
    of the bar's step rate and ETA. Without a bar it does nothing."""
    return self._progress.phase(name)

  def print(self, message: str) -> None:
    if self.enabled:
      self._progress.print(message)

  def close(self) -> None:
    if not self.enabled:
      return
    self._progress.close()
    for writer in self._writers.values():
      writer.close()
    if self._jsonl is not None:
      self._jsonl.close()


def read_metrics(model_dir: str) -> list[dict]:
  path = os.path.join(model_dir, METRICS_FILE)
  if not os.path.exists(path):
    return []
  with open(path) as f:
    return [json.loads(line) for line in f if line.strip()]


def plot_loss_curve(model_dir: str) -> str | None:
  """Draws train (and eval) loss against step into model_dir/loss_curve.png.

  A resumed run may have logged some steps twice; the latest record of a step wins.
  """
  if jax.process_index() != 0:
    return None
  records = read_metrics(model_dir)
  curves = {}
  for split in ("train", "eval"):
    by_step = {r["step"]: r["loss"] for r in records if r["split"] == split and "loss" in r}
    if by_step:
      steps = sorted(by_step)
      curves[split] = (np.array(steps), np.array([by_step[s] for s in steps]))
  if not curves:
    return None
  import matplotlib
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt
  fig, ax = plt.subplots(figsize=(7, 4.5))
  for split, (steps, losses) in curves.items():
    ax.plot(steps, losses, marker="o" if split == "eval" else None, label=f"{split} loss")
  ax.set_xlabel("step")
  ax.set_ylabel("loss")
  ax.set_title(os.path.basename(os.path.normpath(model_dir)))
  ax.grid(alpha=0.3)
  ax.legend()
  path = os.path.join(model_dir, CURVE_FILE)
  fig.tight_layout()
  fig.savefig(path, dpi=100)
  plt.close(fig)
  return path
