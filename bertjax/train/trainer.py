"""Pretraining runs: one jitted, sharded step on the shared loop; checkpoints; evaluation.

    Trainer(model_dir=...).run('train' | 'evaluate' | 'train_and_evaluate')

Everything else (model, objective, data, optimizer, batch, mesh) comes from gin.
The state lives on the mesh in the layout its logical axes give it and the step donates
the old state (`train.setup`, as in fine-tuning and SBERT), and the loop (`train.loop`) only
syncs with the devices when it logs, evaluates or saves. A non-finite loss never
reaches a checkpoint: metrics are checked before every save, and
`on_nonfinite='stop'` ends the run with the last good checkpoint intact, while
'skip' drops those updates and carries on; a state that is not finite is never saved.

Before any compute, `check(mode)` refuses what cannot work: a gin model that differs
from the one the run's checkpoints were trained with (`checkpoints.model_record`),
checkpoints none of which is intact, an evaluation with nothing to evaluate. A run
resumes from its newest intact checkpoint, and a finished run is not trained again.
"""
import functools
import itertools
import json
import os
from typing import Any, Callable

from absl import logging
import gin
import jax
import jax.numpy as jnp

from bertjax import checkpoints, paths
from bertjax.train import distributed, eval_loop, flops, metrics as metrics_writer
from bertjax.train import optimizers, partitioning, preemption
from bertjax.train import inputs as train_inputs, loop as train_loop, state as train_state
from bertjax.train import prng, run_start, setup as train_setup, step as train_step
from bertjax.configurables import typechecked
from bertjax.data.preprocessors import stats as data_rules

RESULTS_FILE = "results.json"
# Raised by the shared loop; `bertjax.main` and users catch it under this name too.
NonFiniteLossError = train_loop.NonFiniteLossError


@jax.jit
def _all_finite(tree) -> jax.Array:
  flags = [jnp.isfinite(x).all() for x in jax.tree.leaves(tree)
           if jnp.issubdtype(x.dtype, jnp.inexact)]
  return jnp.stack(flags).all() if flags else jnp.asarray(True)


@gin.configurable
class Trainer:
  """A training / evaluation run of one model on one task.

  Args (all gin-bindable, `Trainer.<name>`):
    model_dir: where checkpoints, TensorBoard logs, metrics and configs go.
    model: the linen module (`@build_model()`).
    objective: loss + metrics over the model's outputs (`@bert_pretraining()`).
    train_task / eval_task: task names passed to `data_fn` (eval_task defaults to train_task).
    data_fn: (task_name, split, batch_size, sequence_length, seed, shard_id, num_shards)
      -> tf.data.Dataset or iterable of numpy batches (host-local).
    num_train_steps, batch_size (global), sequence_length, num_microbatches.
    eval_split, eval_batch_size, eval_steps (None: the whole split).
    attention_signal_batches: on this many of the eval batches, also measure the largest
      attention any head puts on the previous / next token (train.attention_signals:
      whether the model has learned word order); 0: not measured.
    evaluators: more metrics at every evaluation, each a callable
      (model, params, task_name=, split=, sequence_length=) -> {name: float}, e.g.
      generation metrics (bertjax.train.evaluators.GenerationEvaluator).
    seed: parameter init and dropout; data_seed: the input pipeline (default: seed).
    log_every, checkpoint_every, eval_every (0: only at the end).
    keep_checkpoints (last N), best_metric / best_mode (also keep the best eval step).
    init_checkpoint: weights to start a *new* run from (ignored when resuming).
    allow_config_change: model config fields (e.g. 'hidden_dropout', or dotted
      'student.config.hidden_dropout') that may differ from the run's recorded model when
      it resumes; any other difference is refused.
    on_nonfinite: 'stop' or 'skip'.
    mesh: a ready jax Mesh (from code, e.g. a multi-host launcher); default `make_mesh()`.
    prng_impl: the random-bit generator behind dropout and sampling, set as JAX's
      `jax_default_prng_impl` for the whole process: 'threefry2x32' (JAX's default: the
      same bits on every backend, sharding and JAX version), 'rbg' or 'unsafe_rbg' (the
      generators t5x and MaxText train with on TPU; on CPU a dropout mask takes about 4x
      longer than threefry's; the bits may change with the backend, the sharding or the JAX
      version, and 'unsafe_rbg' splits keys with weaker guarantees). A seed gives other
      dropout masks under each; the state's key takes the generator's shape (2 words for
      threefry, 4 for the others), so a run resumes only with the generator it was started
      with.
  """

  @typechecked
  def __init__(self, model_dir: str, model: Any = gin.REQUIRED, objective: Any = gin.REQUIRED,
               train_task: str | None = None, eval_task: str | None = None,
               data_fn: Callable = train_inputs.task_dataset,
               num_train_steps: int = gin.REQUIRED, batch_size: int = gin.REQUIRED,
               sequence_length: int = 128, num_microbatches: int = 1,
               eval_split: str = "validation", eval_batch_size: int | None = None,
               eval_steps: int | None = 20, attention_signal_batches: int = 2,
               evaluators: tuple | list = (),
               seed: int = 0, data_seed: int | None = None,
               log_every: int = 50, checkpoint_every: int = 1000, eval_every: int = 0,
               keep_checkpoints: int = 3, best_metric: str | None = None,
               best_mode: str = "max", async_checkpoints: bool = True,
               init_checkpoint: str | None = None, allow_config_change: tuple | list = (),
               on_nonfinite: str = "stop",
               show_progress: bool = True, mesh: Any = None,
               prng_impl: str = "threefry2x32"):
    prng.set_prng_impl(prng_impl)
    if on_nonfinite not in ("stop", "skip"):
      raise ValueError(f"gin binding Trainer.on_nonfinite = {on_nonfinite!r}: use 'stop' or 'skip'.")
    for name, value in (("num_train_steps", num_train_steps), ("batch_size", batch_size),
                        ("num_microbatches", num_microbatches), ("log_every", log_every),
                        ("checkpoint_every", checkpoint_every)):
      if value < 1:
        raise ValueError(f"gin binding Trainer.{name} = {value}: must be >= 1.")
    self.model_dir = os.path.abspath(model_dir)
    self.model, self.objective = model, objective
    self.train_task, self.eval_task = train_task, eval_task or train_task
    self.data_fn = data_fn
    self.num_train_steps, self.batch_size = num_train_steps, batch_size
    self.sequence_length, self.num_microbatches = sequence_length, num_microbatches
    self.eval_split, self.eval_batch_size = eval_split, eval_batch_size or batch_size
    self.eval_steps, self.evaluators = eval_steps, tuple(evaluators)
    self.eval_loop = eval_loop.EvalLoop(
        model, objective, attention_signal_batches,
        [functools.partial(evaluator, task_name=self.eval_task, split=eval_split,
                           sequence_length=sequence_length) for evaluator in self.evaluators])
    self.seed, self.data_seed = seed, seed if data_seed is None else data_seed
    self.log_every, self.checkpoint_every, self.eval_every = log_every, checkpoint_every, eval_every
    self.init_checkpoint, self.on_nonfinite = init_checkpoint, on_nonfinite
    self.allow_config_change = tuple(allow_config_change)
    self.show_progress = show_progress

    # Everything below is gin-configured too; building it here makes a bad binding
    # fail before any data is read or any step compiled.
    self.mesh = mesh if mesh is not None else partitioning.make_mesh()
    self.rules = partitioning.axis_rules()
    self.tx, self.schedule = optimizers.make_optimizer(total_steps=num_train_steps)
    data_size = self.mesh.shape.get("data", 1)
    if batch_size % (data_size * num_microbatches):
      raise ValueError(f"Trainer.batch_size={batch_size} must divide by the data axis "
                       f"({data_size}) x num_microbatches ({num_microbatches}).")
    self.checkpoints = checkpoints.RunCheckpoints(
        self.model_dir, keep=keep_checkpoints, best_metric=best_metric, best_mode=best_mode,
        async_save=async_checkpoints)
    self.batch_sharding = partitioning.batch_sharding(self.mesh, self.rules)
    self._checked: dict[str, run_start.StartPoint] = {}
    self._data_rules_seen: dict[str, int] = {}
    self._writer: metrics_writer.MetricsWriter | None = None

  # ------------------------------------------------------------------------- data
  def _dataset(self, task: str | None, split: str, batch_size: int):
    if task is None:
      raise ValueError("No task to read: bind Trainer.train_task (and optionally eval_task).")
    shard = train_inputs.host_shard(batch_size, self.batch_sharding)
    return self.data_fn(task, split=split, batch_size=shard.batch_size,
                        sequence_length=self.sequence_length, seed=self.data_seed,
                        shard_id=shard.shard_id, num_shards=shard.num_shards)

  # ------------------------------------------------------------------------- state
  def _setup_state(self, example: dict) -> None:
    """The state's layout (`train.setup`) from one example batch (shapes only), once the
    batch is known to fit the model."""
    run_start.check_batch(self.model, example, self.sequence_length)
    self.setup = train_setup.build(self.model, example, self.objective.model_inputs,
                                   (self.tx, self.schedule), self.mesh, self.rules)
    params = self.setup.abstract_state.params
    inputs = self.objective.model_inputs(self.setup.example)
    outputs = jax.eval_shape(lambda p: self.model.apply({"params": p}, **inputs), params)
    self.flops_per_token = flops.for_model(self.model, params, self.sequence_length, outputs)

  def _restore_or_init(self, resume: int | None) -> tuple[train_state.TrainState, int]:
    """(state, batches consumed): resumes checkpoint `resume`, else starts."""
    if resume is not None:
      state, extra = self.checkpoints.restore(resume, self.setup.restore_target())
      self._log(f"Resumed from step {resume} in {self.checkpoints.directory}.")
      return state, int(extra.get("batches_consumed", resume))
    state = self.setup.new_state(self.seed)
    if self.init_checkpoint:
      pretrained, meta = checkpoints.load_params(self.init_checkpoint)
      merged, fresh = train_state.merge_pretrained(distributed.host_copy(state.params),
                                                   pretrained, self.init_checkpoint)
      state = self.setup.new_state(self.seed, params=merged)
      self._log(f"Initialized from {self.init_checkpoint} ({meta.get('family', 'weights')}); "
                f"{len(fresh)} parameters new: {fresh[:4]}{'...' if len(fresh) > 4 else ''}")
    return state, 0

  # ------------------------------------------------------------------------- steps
  def _initial_carry(self, resumed_step: int | None = None):
    """The objective's carried state on the mesh (None when it carries nothing): zero
    for a new run, the checkpoint's for a resumed one (as an uninterrupted run has it)."""
    if not train_step.carries_state(self.objective):
      return None
    make = lambda: self.objective.initial_carry(self.model, self.batch_size)
    zeros = jax.jit(make, out_shardings=self.batch_sharding)()
    if resumed_step is None or not jax.tree.leaves(zeros):
      return zeros
    target = jax.tree.map(lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=a.sharding),
                          zeros)
    restored = self.checkpoints.restore_carry(resumed_step, target)
    if restored is None:
      self._log(f"Checkpoint {resumed_step} holds no carried state; continuing from zeros.")
      return zeros
    return restored

  # ------------------------------------------------------------------------- public
  MODES = ("train", "evaluate", "train_and_evaluate")

  def check(self, mode: str) -> int | None:
    """Refuses, before any compute, what `mode` cannot do with model_dir (module
    docstring); returns the step to resume from (None: start fresh)."""
    if mode not in self.MODES:
      raise ValueError(f"--mode={mode!r}: use one of {list(self.MODES)}.")
    key = "evaluate" if mode == "evaluate" else "train"
    if key not in self._checked:
      self._checked[key] = run_start.start_point(
          self.checkpoints, self.model, evaluate=key == "evaluate",
          init_checkpoint=self.init_checkpoint, allow_config_change=self.allow_config_change,
          log=self._log)
    return self._checked[key].step

  def run(self, mode: str = "train_and_evaluate") -> dict:
    self.check(mode)
    if mode == "evaluate":
      return self.evaluate_latest()
    return self.train(evaluate=mode == "train_and_evaluate")

  def evaluate(self, params: Any, writer=None, step: int = 0) -> dict[str, float]:
    """Metrics over `eval_steps` batches of the eval split (all of it when None)."""
    host_bs = train_inputs.host_shard(self.eval_batch_size, self.batch_sharding).batch_size
    dataset = self._dataset(self.eval_task, self.eval_split, self.eval_batch_size)
    batches = train_inputs.take(train_inputs.iterate(dataset), self.eval_steps)
    results = self.eval_loop(self.setup, params, batches, host_bs, self.batch_sharding,
                             f"Eval split {self.eval_split!r} of task {self.eval_task!r}")
    if writer is not None:
      writer.write("eval", step, results)
      writer.print(f"[eval @ step {step}] " + metrics_writer.format_scalars(results))
      applied = data_rules.summary(self._data_rules_seen)
      self._data_rules_seen = data_rules.snapshot()
      if applied:
        logging.info("Data rules applied up to step %d: %s", step, applied)
    return results

  def evaluate_latest(self) -> dict[str, float]:
    """`--mode=evaluate`: the newest intact checkpoint (or init_checkpoint) on the eval
    split."""
    results, step = self._evaluate_checkpoint(self.check("evaluate"))
    self._write_results({"eval": results, "step": step})
    return results

  def _evaluate_checkpoint(self, step: int | None) -> tuple[dict[str, float], int]:
    """(eval metrics, step) of checkpoint `step` (None: the init_checkpoint)."""
    dataset = self._dataset(self.eval_task, self.eval_split, self.eval_batch_size)
    self._setup_state(next(train_inputs.iterate(dataset)))
    state, _ = self._restore_or_init(step)
    writer = metrics_writer.MetricsWriter(self.model_dir, 0, show_progress=False)
    results = self.evaluate(state.params, writer, int(state.step))
    writer.close()
    return results, int(state.step)

  def train(self, evaluate: bool = True) -> dict:
    """Trains to num_train_steps (resuming if model_dir has a checkpoint)."""
    resume = self.check("train")
    if resume is not None and resume >= self.num_train_steps:
      return self._finished(resume, evaluate)
    writer = metrics_writer.MetricsWriter(self.model_dir, self.num_train_steps, resume or 0,
                                          self.show_progress)
    self._writer = writer  # _log's lines go above the bar
    try:
      with writer.phase("reading data"):
        first, batches, consumed = self._first_batch(resume)
      with writer.phase("initializing"):
        self._setup_state(first)
        state, restored = self._restore_or_init(resume)
        if restored != consumed:
          raise RuntimeError(f"Checkpoint changed while starting: {restored} != {consumed}.")
        start = int(state.step)
        run_start.record_model(self.model_dir, self.model, self._checked["train"], start)
        carry = self._initial_carry(resumed_step=start or None)
    except BaseException:
      writer.close()
      self._writer = None
      raise
    self._log(f"Training {type(self.model).__name__} on {self.train_task!r}: steps {start} -> "
              f"{self.num_train_steps}, batch {self.batch_size} x {self.sequence_length} tokens, "
              f"mesh {dict(self.mesh.shape)}, {self.flops_per_token / 1e6:.1f} MFLOPs/token.")
    eval_results = None

    def eval_now(done: int) -> bool:
      return evaluate and (done == self.num_train_steps
                           or bool(self.eval_every and done % self.eval_every == 0))

    def save_now(done: int) -> bool:  # asks the watch at every step (multi-process protocol)
      return (watch.reached(done) or done == self.num_train_steps
              or done % self.checkpoint_every == 0)

    def evaluate_and_save(done: int, state, carry) -> None:
      nonlocal eval_results
      evaluated = eval_now(done)
      if evaluated:
        with writer.phase("evaluating"):
          eval_results = self.evaluate(state.params, writer, done)
      if save_now(done):
        with writer.phase(f"writing checkpoint {done}"):
          self._check_finite(done, state, carry)
          self.checkpoints.save(done, state, {"batches_consumed": consumed + done - start,
                                              "data_seed": self.data_seed},
                                metrics=eval_results if evaluated else None, carry=carry)

    runner = train_loop.TrainLoop(
        self.setup.jit_train_step(self.model, self.objective, self.num_microbatches),
        writer, self.log_every,
        tokens=lambda batch: self.batch_size * self.sequence_length,
        on_nonfinite=self.on_nonfinite, advice=self._nonfinite_advice,
        flops_per_token=self.flops_per_token,
        data_name=f"Training data of {self.train_task!r}")
    batches = (train_inputs.to_global(b, self.batch_sharding) for b in batches)
    curve, finished = None, False
    with preemption.Watch() as watch:  # until the last checkpoint is sealed
      try:
        state, carry, _ = runner.run(state, batches, start, self.num_train_steps, carry,
                                     pause_at=lambda done: save_now(done) or eval_now(done),
                                     on_pause=evaluate_and_save, stop_after=watch.reached)
        if watch.signum is not None:
          writer.print("Stopping: writing the final checkpoint.")
        with writer.phase("writing the final checkpoint"):
          self.checkpoints.wait()
        finished = int(state.step) >= self.num_train_steps
        if finished:
          with writer.phase("drawing the loss curve"):
            curve = metrics_writer.plot_loss_curve(self.model_dir)
      finally:
        self.checkpoints.close()
        writer.close()
        self._writer = None
    if watch.signum is not None and not finished:
      raise preemption.Preempted(int(state.step), watch.signum,
                                 f" in {self.checkpoints.directory}")
    summary = {"step": int(state.step), "eval": eval_results,
               "loss_curve": curve, "checkpoints": self.checkpoints.directory,
               "tensorboard": os.path.join(self.model_dir, metrics_writer.TB_SUBDIR)}
    self._write_results(summary)
    return summary

  # ------------------------------------------------------------------------- helpers
  def _first_batch(self, resume: int | None) -> tuple[dict, Any, int]:
    """(the first batch, all batches from it, batches consumed before it). The vocabulary
    travels with the run: fine-tuning reads it from model_dir."""
    dataset = self._dataset(self.train_task, "train", self.batch_size)
    train_inputs.save_vocabulary(self.data_fn, self.train_task, self.model_dir)
    consumed = self.checkpoints.batches_consumed(resume)
    batches = train_inputs.iterate(dataset, skip=consumed)
    first = next(batches, None)  # Shapes for the abstract state; then trained on, not dropped.
    if first is None:
      dropped = data_rules.summary()
      raise ValueError(f"Task {self.train_task!r} gave no training batch: the source of its "
                       f"'train' split has no documents left after filtering (or none the "
                       f"recipe keeps at sequence_length {self.sequence_length}). Check "
                       "task_dataset.source and the files it reads" +
                       (f" (data rules applied: {dropped})." if dropped else "."))
    return first, itertools.chain([first], batches), consumed

  def _finished(self, step: int, evaluate: bool) -> dict:
    """A re-run of a finished run: its results stay (evaluated now if they lack an eval)."""
    path = os.path.join(self.model_dir, RESULTS_FILE)
    results = {}
    if os.path.isfile(path):
      with open(path) as f:
        results = json.load(f)
    self._log(f"The run in {self.model_dir} is already finished: its newest checkpoint is step "
              f"{step} (Trainer.num_train_steps = {self.num_train_steps}); results: {path}. "
              f"Raise Trainer.num_train_steps to train on.")
    if evaluate and not (results.get("eval") and results.get("step") == step):
      results["eval"], results["step"] = self._evaluate_checkpoint(step)
      self._write_results(results)
    return results

  def _check_finite(self, step: int, state, carry) -> None:
    """Stops before a state holding NaN/Inf (e.g. an overflowed optimizer moment) is saved."""
    if not bool(_all_finite((state.params, state.opt_state, carry))):
      raise NonFiniteLossError(f"The parameters, optimizer state or carried state hold NaN/Inf "
                               f"at step {step}; not saved. Stopped; {self._nonfinite_advice()}")

  def _nonfinite_advice(self) -> str:
    try:  # (waits for the saves under way)
      good = self.checkpoints.newest_intact_step(log=self._log)
    except checkpoints.CheckpointError:
      good = None
    return (f"the last good checkpoint is {'step ' + str(good) if good is not None else 'none'}"
            f" in {self.checkpoints.directory}. Lower the learning rate, check the data, or set "
            f"Trainer.on_nonfinite = 'skip' to drop such updates.")

  def _write_results(self, results: dict) -> None:
    if jax.process_index() == 0:
      paths.write_atomic(os.path.join(self.model_dir, RESULTS_FILE),
                         json.dumps(results, indent=2, default=float))

  def _log(self, message: str) -> None:
    if self._writer is not None:
      self._writer.print(message)
    elif jax.process_index() == 0:
      print(message, flush=True)

