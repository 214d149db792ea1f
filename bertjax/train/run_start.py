"""Where a run starts from, decided before any compute (`Trainer.check`).

- The run's checkpoints were trained with the gin model (`checkpoints.model_record`),
  or every difference is allowed (`Trainer.allow_config_change`).
- It resumes from the newest intact checkpoint; newer damaged ones are reported (and,
  for training, set aside); CheckpointError when there are checkpoints but none is intact.
- A fresh run's `init_checkpoint` exists; an evaluation has something to evaluate.
- The data fits the model: token ids below its vocab_size, rows no longer than its
  position table (`check_batch`, on the first batch).
"""
import logging
import os
from typing import Any, Callable, NamedTuple

import jax
import numpy as np

from bertjax import checkpoints
from bertjax.checkpoints import model_record, record
from bertjax.layers.embeddings import check_length
from bertjax.models.common.config import max_positions


class StartPoint(NamedTuple):
  step: int | None                 # the checkpoint to resume from; None: a fresh start
  model_changes: dict[str, list]   # allowed differences from the recorded model


def start_point(run: checkpoints.RunCheckpoints, model: Any, *, evaluate: bool,
                init_checkpoint: str | None, allow_config_change=(),
                log: Callable[[str], None] = print) -> StartPoint:
  model_dir = os.path.dirname(run.directory)
  changes = {}
  if run.all_steps():
    changes = model_record.changes(model_dir, model, allow_config_change)
  step = run.newest_intact_step(set_aside=not evaluate, log=log)
  if step is None and init_checkpoint and not os.path.isdir(init_checkpoint):
    raise checkpoints.CheckpointError(
        f"gin binding Trainer.init_checkpoint = {init_checkpoint!r}: no such folder; give a "
        "`python -m bertjax.convert` output or an earlier run's model_dir.")
  if step is None and evaluate and not init_checkpoint:
    listing = sorted(os.listdir(model_dir)) if os.path.isdir(model_dir) else None
    lacks = ("the folder does not exist" if listing is None else
             f"no {checkpoints.RUN_SUBDIR}/<step>/ folder; it holds {listing[:8]}")
    raise checkpoints.CheckpointError(
        f"--mode=evaluate: {model_dir} holds no checkpoint to evaluate ({lacks}). Give the "
        "model_dir of a training run, or bind Trainer.init_checkpoint to the weights to evaluate.")
  return StartPoint(step, changes)


def record_model(model_dir: str, model: Any, start: StartPoint, step: int) -> None:
  """Records the run's model when it starts fresh, changes as allowed, or has no record:
  model_config.json (what a resume is compared with) and model.json (what `open_model`
  reads: `checkpoints.record`; not for a model without a family, e.g. ELMo)."""
  if jax.process_index() != 0:
    return
  anew = start.step is None or bool(start.model_changes)
  os.makedirs(model_dir, exist_ok=True)
  if anew or not os.path.isfile(model_record.record_path(model_dir)):
    model_record.write(model_dir, model, step, start.model_changes)
  if anew or not os.path.isfile(os.path.join(model_dir, record.FILE)):
    try:
      trained = record.of_trained(model)
      if trained is not None:
        record.write(model_dir, trained)
    except ValueError as e:  # a config without a JSON form: the run opens from config.gin
      logging.warning("No %s for this run: %s", record.FILE, e)


def check_batch(model: Any, batch: dict, sequence_length: int) -> None:
  """Refuses a batch the model cannot read, saying which binding to change."""
  config = getattr(model, "config", None)
  vocab_size = getattr(config, "vocab_size", None)
  if vocab_size and "input_ids" in batch and int(np.max(batch["input_ids"])) >= vocab_size:
    raise ValueError(f"The data has token id {int(np.max(batch['input_ids']))} but the model's "
                     f"vocab_size is {vocab_size}; bind build_model.config_overrides = "
                     f"{{'vocab_size': ...}} to the vocabulary's size.")
  limit = max_positions(config)
  for name in ("input_ids", "decoder_input_ids"):
    if name in batch:
      check_length(np.shape(batch[name])[-1], limit,
                   f"gin binding Trainer.sequence_length = {sequence_length} ({name})",
                   f"Bind Trainer.sequence_length <= {limit} (or, training from scratch, "
                   f"build_model.config_overrides = {{'max_position_embeddings': ...}})")
