"""The one training loop: a jitted train step applied to a stream of batches.

Pretraining (`train.trainer.Trainer`), fine-tuning (`finetune.loop.Finetuner`) and
SBERT training (`sbert.train`) all run `TrainLoop.run`. Step metrics stay on the
devices until a flush: every `log_every` steps, at the last step and before every
pause (`pause_at(step)`: an evaluation, a checkpoint, the end of an epoch). A flush
waits for those steps and checks them: the step has already dropped any non-finite
update (`train.step`), and the loop then stops the run (`on_nonfinite='stop'`:
NonFiniteLossError naming the first bad step, raised before the pause can evaluate
or save anything) or reports the skipped steps ('skip'). It writes one `train` row
through `train.metrics.MetricsWriter`: the means of the step metrics (`loss`,
`learning_rate`, `grad_norm`, the objective's own), `nonfinite` as a count, and the
throughput of the steps since the last flush, leaving out compilation (the first
step), writing and pauses. The progress bar counts steps as they finish, keeping one
step in flight while the host prepares the next batch, so its ETA is the step rate.
"""
import contextlib
import dataclasses
import time
from typing import Any, Callable, Iterator

import jax

from bertjax.train import metrics as train_metrics

NONFINITE_MODES = ("stop", "skip")


class NonFiniteLossError(RuntimeError):
  """The loss, gradient norm or updated params became NaN/Inf and the run was set to stop."""


def _never(step: int) -> bool:
  del step
  return False


@dataclasses.dataclass
class TrainLoop:
  """How to run steps; `run` then drives one stretch of training.

  Attributes:
    step_fn: the jitted step: (state, batch) -> (state, metrics), or (state, batch,
      carry) -> (state, metrics, carry) for an objective that carries state.
    writer: where the `train` rows go (and the progress bar, if it has one).
    log_every: steps between `train` rows.
    tokens: batch -> the tokens it holds (padding included), for tokens_per_sec.
    on_nonfinite: 'stop' or 'skip' (module docstring).
    advice: () -> what the stop error tells the user to do, after "Stopped; ".
    flops_per_token: model FLOPs per token, for model_flops_per_sec (None: not logged).
    log: also prints every row as 'step N/M name=value, ...' (a run without a bar).
    data_name: names the batch stream in the error when it ends too early.
  """
  step_fn: Callable
  writer: train_metrics.MetricsWriter
  log_every: int
  tokens: Callable[[Any], int]
  on_nonfinite: str = "stop"
  advice: Callable[[], str] = lambda: "lower the learning rate or check the data."
  flops_per_token: float | None = None
  log: Callable[[str], None] | None = None
  data_name: str = "The training data"

  def __post_init__(self):
    if self.on_nonfinite not in NONFINITE_MODES:
      raise ValueError(f"on_nonfinite={self.on_nonfinite!r}: use one of {NONFINITE_MODES}.")
    if self.log_every < 1:
      raise ValueError(f"log_every={self.log_every}: must be >= 1.")

  def run(self, state: Any, batches: Iterator, start: int, stop: int, carry: Any = None,
          pause_at: Callable[[int], bool] = _never,
          on_pause: Callable[[int, Any, Any], None] | None = None,
          stop_after: Callable[[int], bool] = _never,
          unflushed: list | None = None) -> tuple[Any, Any, list]:
    """Steps `start` -> `stop`, one batch each; returns (state, carry, rows written).

    After a step that `pause_at(steps done)` names, the pending metrics are flushed
    (and checked) and `on_pause(steps done, state, carry)` runs; after a step that
    `stop_after` names (a preemption, `train.preemption`), the run ends there, once that
    pause is over. Each returned row is the written one plus `step` and `elapsed_s`
    (seconds since `run` began).

    A stop between flushes leaves the metrics of the steps since the last flush, unchecked
    and unwritten, in `self.unflushed` (host copies); passed back as `unflushed` to the run
    that resumes at `start`, they join its first row, which is then the row an
    uninterrupted run writes (the same sums, added in the same order).
    """
    began = time.perf_counter()
    rows, pending = [], list(unflushed or [])
    self.unflushed = []
    timer = None  # since when the steps of `timed_*` ran; None until compiled
    timed_steps, timed_tokens = 0, 0
    running = None  # the metrics of the step before, still running on the devices
    for step in range(start, stop):
      try:
        batch = next(batches)
      except StopIteration:
        raise ValueError(f"{self.data_name} ran out after {step} steps; make the train "
                         f"split repeat.") from None
      tokens = self.tokens(batch)
      with self.writer.phase("compiling") if timer is None else contextlib.nullcontext():
        if carry is None:
          state, metrics = self.step_fn(state, batch)
        else:
          state, metrics, carry = self.step_fn(state, batch, carry)
        if timer is None:  # Do not count compilation in the throughput.
          jax.block_until_ready(metrics)
      pending.append(metrics)
      done = step + 1
      if timer is None:
        timer = time.perf_counter()
        self.writer.advance(done)
      else:
        timed_steps, timed_tokens = timed_steps + 1, timed_tokens + tokens
      if running is not None:  # The bar counts finished steps; one more stays in flight.
        jax.block_until_ready(running)
        self.writer.advance(done - 1)
      running = metrics
      pause = pause_at(done)
      if done % self.log_every == 0 or done == stop or pause:
        scalars = self._flush(pending, done, stop, timer, timed_steps, timed_tokens)
        timer = time.perf_counter()  # Writing (the first imports TensorBoard) is not training.
        rows.append({"step": done, **scalars, "elapsed_s": timer - began})
        pending, timed_steps, timed_tokens, running = [], 0, 0, None
      if pause and on_pause is not None:
        on_pause(done, state, carry)
        timer = time.perf_counter()  # Pauses block; keep their time out of tokens/s.
      if stop_after(done):
        self.unflushed = jax.device_get(pending)
        break
    return state, carry, rows

  def _flush(self, pending: list, step: int, stop: int, since: float, steps: int,
             tokens: int) -> dict[str, float]:
    """Pulls the pending step metrics to the host (waiting for those steps), checks
    finiteness and writes their row; returns its scalars."""
    per_step = jax.device_get(pending)
    seconds = time.perf_counter() - since
    bad = [step - len(per_step) + 1 + i for i, m in enumerate(per_step) if m["nonfinite"][0] > 0]
    if bad and self.on_nonfinite == "stop":
      raise NonFiniteLossError(f"The loss, gradient norm or updated parameters are NaN/Inf at "
                               f"step {bad[0]}. Stopped; {self.advice()}")
    total = None
    for m in per_step:
      total = train_metrics.sum_metrics(total, m)
    scalars = train_metrics.reduce_metrics(total)
    scalars["nonfinite"] = scalars["nonfinite"] * len(per_step)  # a count, not a rate
    if steps > 0 and seconds > 0:
      scalars.update({"steps_per_sec": steps / seconds, "tokens_per_sec": tokens / seconds})
      if self.flops_per_token is not None:
        scalars["model_flops_per_sec"] = scalars["tokens_per_sec"] * self.flops_per_token
    if bad:
      self.writer.print(f"Skipped {len(bad)} non-finite step(s): {bad[:5]}")
    self.writer.write("train", step, scalars)
    self.writer.advance(step, {k: scalars[k] for k in ("loss", "learning_rate") if k in scalars})
    if self.log is not None:
      self.log(f"step {step}/{stop} {train_metrics.format_scalars(scalars)}")
    return scalars
