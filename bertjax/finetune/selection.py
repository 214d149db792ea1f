"""Evaluation after every epoch and best-epoch selection, through the run checkpoints.

BERT's recipe picks, among a few epochs (and learning rates), the model that scores
best on dev. `fit` trains a `loop.Finetuner`, evaluates on dev after each epoch,
writes the train rows and the scores to `metrics.jsonl` (and TensorBoard) through
`train.metrics.MetricsWriter`, saves the params of each evaluated epoch with
`checkpoints.RunCheckpoints` keeping only the best on the task's main metric (so
`checkpoints.load_params(directory)` reads the selected model), and at the end
restores the best epoch's params into the finetuner, so test-set predictions come
from them. The best epoch's dev outputs are kept in memory, so the
dev predictions written afterwards are that epoch's without another pass.
"""
import contextlib
import dataclasses
import json
import math
import os
import time
from typing import Any, Callable

import jax
from absl import logging

from bertjax import checkpoints
from bertjax.finetune import loop, resume
from bertjax.train import metrics as train_metrics, preemption

METRICS_FILE = train_metrics.METRICS_FILE
# Orbax ranks steps by a finite number; an undefined score (NaN correlation) is worst.
_WORST = -1e30

# evaluate(finetuner) -> ({split: {metric: value}}, outputs to write predictions from).
Evaluate = Callable[[loop.Finetuner], tuple[dict[str, dict[str, Any]], Any]]


@dataclasses.dataclass
class Selection:
  """What `fit` found: per-epoch scores, the best epoch and its dev outputs."""
  metric: str                  # "split/name", e.g. "dev/accuracy"
  epochs: list[dict[str, Any]]  # {"epoch", "step", "eval": {split: scores}}
  best: dict[str, Any]         # {"epoch", "step", "value"}
  outputs: Any                 # the best epoch's evaluate() outputs
  train_history: list[dict[str, float]]

  @property
  def scores(self) -> dict[str, dict[str, Any]]:
    """The best epoch's scores per split."""
    return next(e["eval"] for e in self.epochs if e["step"] == self.best["step"])

  def report(self) -> dict[str, Any]:
    return {"selection_metric": self.metric, "best_epoch": self.best,
            "epochs": self.epochs}


def fit(tuner: loop.Finetuner, arrays: loop.Arrays, num_steps: int, evaluate: Evaluate,
        metric: str, directory: str, each_epoch: bool = True,
        tensorboard: bool = True, loss_curve: bool = False, desc: str = "finetune",
        resumable: bool = False) -> Selection:
  """Trains `num_steps`, evaluating after every epoch (or only at the end), and leaves
  the best evaluated params (by `metric` = "split/name", higher is better) in `tuner`.

  `directory` receives `checkpoints/<step>/` (the best evaluated params, under
  `state/params`), `metrics.jsonl` (the `train` rows every `log_every` steps and one
  row per evaluated split and epoch), with `tensorboard` their event files and with
  `loss_curve` the training loss drawn (`loss_curve.png`). A progress bar
  (`FinetuneConfig.show_progress`, named `desc`) counts the steps and names the evaluations. A
  non-finite step stops training (NonFiniteLossError) before that epoch is evaluated,
  unless the config skips such updates.

  `resumable` (`directory` is kept): SIGTERM / SIGINT stop training after the current
  step, which is saved with the selection so far (`finetune.resume`), and raise
  preemption.Preempted; a fit stopped so in `directory` is resumed from there.
  """
  split, _, name = metric.partition("/")
  identity = stopped = None
  if resumable:
    identity = resume.fingerprint(tuner.config, arrays, num_steps, metric, tuner.state)
    stopped = resume.load(directory, tuner.state, identity)
  # A second run into the same folder would rank its epochs against the first run's.
  earlier = [p for p in (METRICS_FILE, checkpoints.RUN_SUBDIR)
             if os.path.exists(os.path.join(directory, p))]
  if earlier and stopped is None:
    raise FileExistsError(f"{directory} already holds a fine-tuning run ({', '.join(earlier)}) "
                          "with no state to resume from; give a fresh output directory.")
  progress = stopped[1] if stopped else resume.Progress(0, [], {}, [], [])
  if stopped:
    tuner.state = stopped[0]
    resume.rewind(directory, progress.step)
  os.makedirs(directory, exist_ok=True)
  ckpts = checkpoints.RunCheckpoints(directory, keep=0, best_metric=name, best_mode="max",
                                     keep_best=1, async_save=False)
  writer = train_metrics.MetricsWriter(directory, num_steps, start_step=progress.step,
                                       show_progress=tuner.config.show_progress,
                                       tensorboard=tensorboard, desc=desc)
  if stopped:
    writer.print(f"Resumed the fine-tuning stopped after step {progress.step} from "
                 f"{resume.folder(directory)}.")
  epochs, best = progress.epochs, progress.best
  kept = {}  # the best epoch's outputs, when this process evaluated it

  def on_epoch_end(epoch: float, step: int) -> None:
    if not each_epoch and step != num_steps:
      return
    start = time.time()
    with writer.phase(f"evaluating epoch {epoch:g}"):
      scores, outputs = evaluate(tuner)
    scores = json.loads(json.dumps(scores, default=float))  # plain JSON types
    if split not in scores or name not in scores[split]:
      raise ValueError(f"Selection metric {metric!r} is not among the scores "
                       f"{ {s: sorted(v) for s, v in scores.items()} }.")
    value = float(scores[split][name])
    rank = value if math.isfinite(value) else _WORST
    epochs.append({"epoch": epoch, "step": step, "eval": scores})
    _write_scores(writer, epoch, step, scores, time.time() - start)
    with writer.phase(f"writing epoch {epoch:g}'s checkpoint"):
      ckpts.save(step, {"params": tuner.params}, {"epoch": epoch, "eval": scores}, {name: rank})
    writer.print(f"[epoch {epoch:g}, step {step}] {metric} = {value:.4f}")
    logging.info("epoch %s (step %d): %s = %.4f", epoch, step, metric, value)
    if not best or rank >= best["rank"]:  # ties: the later epoch, as Orbax's BestN keeps
      best.update(epoch=epoch, step=step, value=value, rank=rank)
      kept["outputs"] = outputs

  try:
    with preemption.Watch() if resumable else contextlib.nullcontext() as watch:
      history = progress.history + tuner.train(
          arrays, num_steps, on_epoch_end, writer, start=progress.step,
          stop_after=watch.reached if watch else None, unflushed=progress.unflushed)
      with writer.phase("writing the best epoch's checkpoint"):
        ckpts.wait()
      step = int(tuner.state.step)
      if step < num_steps:  # stopped by a signal
        writer.print("Stopping: saving the fine-tuning's state.")
        saved = resume.save(directory, tuner.state, resume.Progress(
            step, epochs, best, history, tuner.unflushed), identity)
        raise preemption.Preempted(step, watch.signum, f" in {saved}")
    resume.clear(directory)
    if best["step"] != num_steps:  # the last epoch was not the best: go back to the best
      target = jax.tree.map(
          lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=a.sharding),
          {"params": tuner.params})
      restored, _ = ckpts.restore(best["step"], target)
      tuner.state = tuner.state.replace(params=restored["params"])
    if "outputs" not in kept:  # evaluated before a resume: evaluate it again
      with writer.phase(f"evaluating epoch {best['epoch']:g} again"):
        kept["outputs"] = evaluate(tuner)[1]
    if loss_curve:
      with writer.phase("drawing the loss curve"):
        train_metrics.plot_loss_curve(directory)
  finally:
    ckpts.close()
    writer.close()
  best.pop("rank")
  logging.info("best epoch %s (step %d): %s = %.4f", best["epoch"], best["step"], metric,
               best["value"])
  return Selection(metric, epochs, best, kept["outputs"], history)


def _write_scores(writer: train_metrics.MetricsWriter, epoch: float, step: int,
                  scores: dict[str, dict[str, Any]], seconds: float) -> None:
  """One row per split: its numbers (also to TensorBoard), the epoch and the rest."""
  for split, values in scores.items():
    values = {**values, "eval_time_s": seconds}
    numbers = {k: v for k, v in values.items()
               if isinstance(v, (int, float)) and not isinstance(v, bool)}
    writer.write(split, step, numbers,
                 extra={"epoch": epoch, **{k: v for k, v in values.items() if k not in numbers}})
