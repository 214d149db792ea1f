"""A pretraining run's evaluation: the objective's metrics over the eval split's batches,
the attention its heads put on neighbouring tokens on the first few of them (has the model
learned word order? `attention_signals`), and any extra evaluators' metrics.

    eval_loop = EvalLoop(model, objective, attention_signal_batches=2)
    results = eval_loop(setup, params, batches, host_batch_size, batch_sharding,
                        source="Eval split 'validation' of task 'c4'")

Its steps are compiled once per state layout (`train.setup`) and reused at every
evaluation of the run.
"""
from typing import Any, Callable, Iterable

import jax

from bertjax.train import attention_signals, inputs as train_inputs, metrics as train_metrics
from bertjax.train import setup as train_setup, step as train_step


class EvalLoop:
  """Metrics of a model's params on a stream of eval batches (module docstring).

  evaluators: callables (model, params) -> {name: float}, run after the batches (the
    trainer binds their task, split and sequence length).
  """

  def __init__(self, model: Any, objective: Any, attention_signal_batches: int = 2,
               evaluators: Iterable[Callable[[Any, Any], dict]] = ()):
    self.model, self.objective = model, objective
    self.attention_signal_batches = attention_signal_batches
    self.evaluators = tuple(evaluators)
    self._steps: tuple[train_setup.TrainSetup, Callable, Callable] | None = None

  def _compiled(self, setup: train_setup.TrainSetup) -> tuple[Callable, Callable]:
    """(eval step, attention step) on `setup`'s layout, compiled at its first use."""
    if self._steps is None or self._steps[0] is not setup:
      attention = attention_signals.make_step(self.model, self.objective,
                                              attention_signals.attention_signal_scope())
      self._steps = (setup,
                     setup.jit_on_params(train_step.make_eval_step(self.model, self.objective)),
                     setup.jit_on_params(attention))
    return self._steps[1:]

  def __call__(self, setup: train_setup.TrainSetup, params: Any, batches: Iterable[dict],
               host_batch_size: int, batch_sharding: Any, source: str) -> dict[str, float]:
    """The metrics of `params` over `batches` (host-local; a short last batch is
    zero-padded, and zero masks and weights count nothing); `source` names the batches when
    there are none."""
    eval_step, attention_step = self._compiled(setup)
    total, count = None, 0
    signals = attention_signals.Accumulator()
    for batch in train_inputs.in_step_across_hosts(batches):
      batch = train_inputs.to_global(train_inputs.pad_batch(batch, host_batch_size),
                                     batch_sharding)
      metrics = eval_step(params, batch)
      if count < self.attention_signal_batches:
        signals.add(attention_step(params, batch))
      total, count = train_metrics.sum_metrics(total, metrics), count + 1
    if total is None:
      raise ValueError(f"{source} is empty.")
    results = train_metrics.reduce_metrics(jax.device_get(total))
    results["eval_batches"] = count
    results.update(signals.result())
    for evaluator in self.evaluators:
      results.update(evaluator(self.model, params))
    return results
