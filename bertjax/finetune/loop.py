"""Fine-tuning on the trainer's pieces: train step, loop, optimizer, TrainState, mesh.

Fine-tuning differs from pretraining in its data and evaluation: datasets are small
in-memory arrays iterated by epochs, the encoder comes from a converted checkpoint
while the head is fresh, and evaluation is a full pass producing per-example outputs
for task-specific post-processing (SQuAD spans, NER words). So this module owns only
the epoch batching, the epoch callback and batched prediction; the step
(`train.step`: microbatching, the non-finite guard, the metrics), the loop
(`train.loop`: metric rows through `train.metrics`, the non-finite stop), the update
rule (`optimizers.adamw_linear`: AdamW, warmup + linear decay, clipping) and the mesh,
state layout and sharded step (`train.setup`) are the shared ones.
"""
import dataclasses
from typing import Any, Callable, Mapping

import flax.linen as nn
import gin
import jax
import numpy as np
from absl import logging

from bertjax.finetune import packing
from bertjax.train import loop as train_loop, metrics as train_metrics, optimizers, partitioning
from bertjax.train import setup as train_setup, state as train_state
from bertjax.configurables import typechecked

Arrays = Mapping[str, np.ndarray]


@dataclasses.dataclass(frozen=True)
class FinetuneConfig:
  """BERT's fine-tuning recipe (Devlin et al., 2019, A.3) with its usual defaults."""
  learning_rate: float = 5e-5
  warmup_fraction: float = 0.1
  batch_size: int = 32
  num_epochs: float = 3.0
  weight_decay: float = 0.01
  clip_grad_norm: float | None = 1.0
  eval_batch_size: int = 64
  seed: int = 0
  log_every: int = 20
  num_microbatches: int = 1       # gradient accumulation: each pass sees batch_size / n rows
  on_nonfinite: str = "stop"      # a NaN/Inf step: stop with an error, or 'skip' its update
  show_progress: bool | None = None  # a progress bar; None: when stderr is a terminal

  def __post_init__(self):
    if self.on_nonfinite not in train_loop.NONFINITE_MODES:
      raise ValueError(f"FinetuneConfig.on_nonfinite = {self.on_nonfinite!r}: use one of "
                       f"{train_loop.NONFINITE_MODES}.")
    if self.num_microbatches < 1 or self.batch_size % self.num_microbatches:
      raise ValueError(f"FinetuneConfig.num_microbatches = {self.num_microbatches}: must be "
                       f">= 1 and divide FinetuneConfig.batch_size = {self.batch_size}.")
    if self.log_every < 1:
      raise ValueError(f"FinetuneConfig.log_every = {self.log_every}: must be >= 1.")

  @property
  def split_rows(self) -> tuple[int, int]:
    """The batches the mesh's data axis splits: a train microbatch's rows, an eval batch's."""
    return self.batch_size // self.num_microbatches, self.eval_batch_size


# gin binds the fields (`FinetuneConfig.learning_rate = 2e-5`); a value of the wrong
# type fails when the config is built, naming the binding.
FinetuneConfig.__init__ = typechecked(FinetuneConfig.__init__)
FinetuneConfig = gin.configurable(FinetuneConfig)


def num_rows(arrays: Arrays) -> int:
  return len(next(iter(arrays.values())))


def trim_padding(batch: Arrays) -> dict[str, np.ndarray]:
  """Drops padding columns beyond the batch's longest row, rounded up to a power of 2.

  Arrays are padded to the task's maximum length, but most rows are much shorter
  (SST-2 averages ~13 pieces at max 128): cutting the shared padding saves most of
  the compute, and power-of-2 lengths (`packing.row_length`, the lengths packed rows
  take) keep the number of compiled shapes to a handful (each a fresh XLA compile).
  """
  mask = batch["attention_mask"]
  axis = mask.ndim - 1
  full = mask.shape[axis]
  longest = int(np.max(np.nonzero(mask.reshape(-1, full).any(0))[0], initial=0)) + 1
  keep = packing.row_length(longest, full)
  if keep == full:
    return dict(batch)
  return {k: (np.take(v, np.arange(keep), axis=axis)
              if v.ndim > axis and v.shape[:axis + 1] == mask.shape else v)
          for k, v in batch.items()}


def lengths(arrays: Arrays) -> np.ndarray:
  """Real tokens per row (the longest choice for multiple-choice rows)."""
  mask = arrays["attention_mask"]
  return mask.reshape(len(mask), -1, mask.shape[-1]).sum(-1).max(-1)


def steps_per_epoch(num_examples: int, batch_size: int) -> int:
  """Full batches per pass over the data (each epoch drops its last partial batch)."""
  return max(num_examples // min(batch_size, num_examples), 1)


def train_batches(arrays: Arrays, batch_size: int, num_steps: int, seed: int,
                  bucket_batches: int = 20, skip: int = 0):
  """`num_steps` batches from reshuffled epochs (each epoch drops its last partial batch),
  less the first `skip` (drawn, not built: the stream of a run resumed at step `skip`).

  Within each run of `bucket_batches` batches of a shuffled epoch, rows are grouped by
  length before batching (and the batches reshuffled), so trimmed batches carry little
  padding while every batch stays a random draw from a random window of the data.
  """
  n = num_rows(arrays)
  batch_size = min(batch_size, n)
  per_epoch = n // batch_size
  row_lengths = lengths(arrays)
  rng = np.random.default_rng(seed)
  step = 0
  while step < num_steps:
    order = rng.permutation(n)[:per_epoch * batch_size]
    batches = []
    for start in range(0, len(order), batch_size * bucket_batches):
      chunk = order[start:start + batch_size * bucket_batches]
      chunk = chunk[np.argsort(row_lengths[chunk], kind="stable")]
      batches += [chunk[i:i + batch_size] for i in range(0, len(chunk), batch_size)]
    for b in rng.permutation(len(batches)):
      if step == num_steps:
        return
      if step >= skip:
        yield trim_padding({k: v[batches[b]] for k, v in arrays.items()})
      step += 1


class Finetuner:
  """Holds one model's train state on a mesh; `train` then `predict`."""

  def __init__(self, module: nn.Module, objective, example: Arrays, config: FinetuneConfig,
               total_steps: int, encoder_params: Any = None, frozen: tuple[str, ...] = (),
               mesh=None, rules=partitioning.DEFAULT_RULES, head_params: Any = None):
    """
    Args:
      module: a heads.* model (params {'encoder', 'head'}).
      objective: a finetune.objectives.* loss.
      example: a few rows of task arrays, used only for shapes.
      total_steps: optimizer steps, for the warmup + decay schedule.
      encoder_params: pretrained weights of the encoder (unboxed); None = random init.
      frozen: param path regexes not to train (e.g. '^encoder/' for a frozen encoder).
      head_params: the head's weights to continue from (unboxed); None = random init.
      mesh, rules: where the state lives and how it is laid out (`train.setup`); None:
        data parallel over the devices that split `config.split_rows`.
    """
    self.module, self.objective, self.config = module, objective, config
    optimizer = optimizers.adamw_linear(
        total_steps, config.learning_rate, int(config.warmup_fraction * total_steps),
        weight_decay=config.weight_decay, clip_grad_norm=config.clip_grad_norm, frozen=frozen)
    self.setup = train_setup.build(module, example, objective.model_inputs, optimizer,
                                   mesh or train_setup.data_parallel_mesh(*config.split_rows),
                                   rules)
    params = None
    if encoder_params is not None:
      random = self.setup.init_params(config.seed)
      pretrained = {"encoder": encoder_params}
      if head_params is not None:
        pretrained["head"] = head_params
      params, fresh = train_state.merge_pretrained(random, pretrained, "encoder_params")
      encoder_fresh = [p for p in fresh if p.startswith("encoder/")]
      if encoder_fresh:
        # A pretrained encoder must cover its whole subtree (only the pooler may be new).
        logging.warning("Encoder params not in the checkpoint, left at random init: %s",
                        encoder_fresh)
      head_fresh = [p for p in fresh if p.startswith("head/")]
      if head_params is not None and head_fresh:
        raise ValueError(f"head_params to continue from lack the head's {head_fresh}.")
    self.state = self.setup.new_state(config.seed, params)
    self._train_step = self.setup.jit_train_step(module, objective, config.num_microbatches)
    self._predict_fns: dict = {}

  def train(self, arrays: Arrays, num_steps: int,
            on_epoch_end: Callable[[float, int], None] | None = None,
            writer: train_metrics.MetricsWriter | None = None, start: int = 0,
            stop_after: Callable[[int], bool] | None = None,
            unflushed: list | None = None) -> list[dict[str, float]]:
    """Runs `num_steps` updates on the shared loop; returns its train rows (every
    `log_every` steps and the last: step, loss, learning_rate, grad_norm, nonfinite, the
    objective's metrics, throughput, elapsed_s), also written to `writer` if given.

    `on_epoch_end(epoch, step)` runs after every full pass over `arrays` and after the
    last step (a fractional epoch when `num_steps` is not a whole number of epochs),
    once the steps so far were checked: with `on_nonfinite='stop'` a NaN/Inf step
    raises NonFiniteLossError before that epoch's model is evaluated (the finetuner's
    state is then gone: nothing trained by it may be used).

    Resuming (`finetune.resume`): `start` is the state's step, `unflushed` the metrics the
    stopped run had not written; `stop_after(step)` ends training after that step, leaving
    the metrics not yet written in `self.unflushed`.
    """
    per_epoch = steps_per_epoch(num_rows(arrays), self.config.batch_size)
    own_writer = writer is None
    if own_writer:
      writer = train_metrics.MetricsWriter(None, num_steps, show_progress=False)

    def epoch_end(step: int, state: train_state.TrainState, carry) -> None:
      del carry
      self.state = state  # The callback evaluates `self.params`.
      on_epoch_end(round(step / per_epoch, 3), step)

    runner = train_loop.TrainLoop(
        self._train_step, writer, self.config.log_every,
        tokens=lambda batch: batch["attention_mask"].size,
        on_nonfinite=self.config.on_nonfinite, advice=self._nonfinite_advice, log=logging.info)
    batches = train_batches(arrays, self.config.batch_size, num_steps, self.config.seed,
                            skip=start)
    try:
      self.state, _, history = runner.run(
          self.state, batches, start, num_steps,
          pause_at=lambda step: on_epoch_end is not None and (step % per_epoch == 0
                                                              or step == num_steps),
          on_pause=epoch_end, stop_after=stop_after or (lambda step: False),
          unflushed=unflushed)
      self.unflushed = runner.unflushed
    finally:
      if own_writer:
        writer.close()
    return history

  def _nonfinite_advice(self) -> str:
    return (f"this model is not evaluated, saved or used for predictions. Lower "
            f"FinetuneConfig.learning_rate (now {self.config.learning_rate:g}), check the "
            f"data, or set FinetuneConfig.on_nonfinite = 'skip' to drop such updates.")

  @property
  def params(self) -> Any:
    return self.state.params

  def predict(self, arrays: Arrays, output_keys: tuple[str, ...], method: Callable | None = None,
              untrim: bool = True, **apply_kwargs) -> dict[str, np.ndarray]:
    """Model outputs (float numpy) for every row, in order; batches are padded to one shape."""
    return predict(self.module, self.state.params, arrays, output_keys,
                   self.objective.model_inputs, self.config.eval_batch_size, self._predict_fns,
                   untrim=untrim, **apply_kwargs)


def predict(module: nn.Module, params: Any, arrays: Arrays, output_keys: tuple[str, ...],
            model_inputs: Callable, batch_size: int, cache: dict | None = None,
            untrim: bool = True, on_batch: Callable[[int], None] | None = None,
            **apply_kwargs) -> dict[str, np.ndarray]:
  """Deterministic forward passes over all rows of `arrays` in fixed-size batches
  (`on_batch(rows)` after each, once its outputs are on the host: a progress bar).

  The last batch is filled up by repeating its first row (never an all-padding row,
  whose fully masked attention is degenerate) and the extra outputs are dropped.
  Per-token outputs of padding-trimmed batches are padded back to the full length
  (`untrim`; off for outputs that are not laid out like the input tokens).
  """
  cache = {} if cache is None else cache
  key = (id(module), output_keys, tuple(sorted(apply_kwargs.items())))
  if key not in cache:
    def forward(p, batch):
      out = module.apply({"params": p}, **model_inputs(batch), deterministic=True,
                         **apply_kwargs)
      return {k: out[k] for k in output_keys}
    cache[key] = jax.jit(forward)
  fn = cache[key]
  n = num_rows(arrays)
  full_length = arrays["attention_mask"].shape[-1]
  # Predict in order of length so trimmed batches hold little padding; undo at the end.
  order = np.argsort(lengths(arrays), kind="stable")
  chunks: dict[str, list] = {k: [] for k in output_keys}
  for start in range(0, n, batch_size):
    idx = order[start:start + batch_size]
    batch = trim_padding({k: v[idx] for k, v in arrays.items()})
    real = num_rows(batch)
    if real < batch_size and n > batch_size:
      batch = {k: np.concatenate([v, np.repeat(v[:1], batch_size - real, 0)])
               for k, v in batch.items()}
    out = fn(params, batch)
    for k in output_keys:
      value = np.asarray(out[k], np.float32)
      if untrim:
        value = _untrim(value, batch["attention_mask"], full_length)
      chunks[k].append(value[:real])
    if on_batch is not None:
      on_batch(real)
  inverse = np.argsort(order)
  return {k: np.concatenate(v)[inverse] if v else np.zeros((0,)) for k, v in chunks.items()}


def _untrim(output: np.ndarray, mask: np.ndarray, full_length: int) -> np.ndarray:
  """Pads a per-token output of a trimmed batch back to the task's length (with 0)."""
  axis = mask.ndim - 1
  if output.ndim <= axis or output.shape[:axis + 1] != mask.shape:
    return output
  pad = [(0, 0)] * output.ndim
  pad[axis] = (0, full_length - mask.shape[axis])
  return np.pad(output, pad)
