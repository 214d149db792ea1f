"""The model a fine-tuning run trains: its encoder family's transformers task class.

GLUE trains <Family>ForSequenceClassification (one regression output for STS-B), SQuAD
<Family>ForQuestionAnswering (XLNet: ...Simple), CoNLL-2003 <Family>ForTokenClassification
and SWAG <Family>ForMultipleChoice: the very modules `bertjax.from_hf` builds for those
classes (models/<family>/tasks.py), so the run's best params are that class's and
`save` writes them as a converted checkpoint of it, into the run's output folder:

  python -m bertjax.convert --to_hf=DIR --checkpoint=OUT   # transformers loads DIR as the class

The encoder starts from the checkpoint's weights (its bare encoder, whatever architecture
of the family it holds); the head starts fresh, unless the checkpoint already is that
task class (a model fine-tuned before, here or with transformers): then its head
continues when its labels are the task's (in any order), and a head for other labels
stops the run before anything trains. `Options.fresh_head` starts a fresh head anyway.

A family without the task's class, or `Options.pooling` 'cls' / 'mean' for a sequence
or multiple-choice task, gets the generic heads of models.common.task_heads instead
(dropout + linear over the pooled vector), which no transformers class loads.

STS-B trains on the centred score (score - center) / scale; the exported head predicts
the score itself (its output layer scaled back), as transformers' pipelines report it.
"""
import dataclasses
import os
from typing import Any

import flax.linen as nn
import jax
import numpy as np
from absl import logging

from bertjax.checkpoints import METADATA_FILE, converted, encoders, record
from bertjax.checkpoints.model import HFModel
from bertjax.hf import tasks
from bertjax.models.common import task_heads as heads

SEQUENCE = "ForSequenceClassification"
TOKENS = "ForTokenClassification"
SPANS = "ForQuestionAnswering"
CHOICES = "ForMultipleChoice"
GENERIC_LABEL = "LABEL_{}"  # transformers' names of labels nobody named


@dataclasses.dataclass
class TaskModel:
  """A task's module with what it starts from, and the class it exports as."""
  module: nn.Module
  encoder: HFModel      # the bare encoder (its config, tokenizer, fit_inputs)
  config: Any               # the encoder's config with the task's labels
  architecture: str | None  # the transformers class (None: generic heads, no export)
  start: dict               # {'encoder': ...} and, for a continued head, 'head'
  # STS-B: outputs are (score - center) / scale while training.
  regression: tuple[float, float] | None = None

  @property
  def description(self) -> str:
    head = "continued head" if "head" in self.start else "fresh head"
    return f"{self.architecture or type(self.module).__name__} ({head})"


def build(model: HFModel, kind: str, labels: tuple[str, ...] | None = None, *,
          regression: tuple[float, float] | None = None, pooling: str = "pooler",
          fresh_head: bool = False, label_values: tuple[str, ...] | None = None) -> TaskModel:
  """The task model of `kind` (SEQUENCE, TOKENS, SPANS, CHOICES) over `model`'s encoder.

  labels: the classes' names in id order (SEQUENCE, TOKENS); label_values: the same
  classes as the data spells them, where a head fine-tuned earlier may name them so
  (GLUE's "0" / "1"); regression: (center, scale) of a single-output SEQUENCE task.
  Raises before anything trains when `model` is the task class with a head for other
  labels.
  """
  encoder = encoders.base_encoder(model)
  config = _task_config(encoder.config, kind, labels, regression)
  architecture = tasks.architecture_for(model.family, kind)
  if kind in (SEQUENCE, CHOICES) and pooling != "pooler":
    architecture = None  # an ablation of the pooled vector: BERT's head over it
  if architecture is None:
    module = _generic(kind, encoder.module, config, pooling)
    logging.info("%s has no %s%s class here: generic head, not exportable to transformers.",
                 model.family.name, kind, "" if pooling == "pooler" else f" with {pooling=}")
  else:
    module = model.family.make_module(architecture, config)
  start = {"encoder": encoder.params}
  if architecture is not None and model.architecture == architecture and not fresh_head:
    start["head"] = _continued_head(model, kind, config, regression, label_values)
  return TaskModel(module, encoder, config, architecture, start, regression)


def _task_config(config: Any, kind: str, labels, regression) -> Any:
  if kind == SEQUENCE:  # how transformers' pipelines read the logits (softmax or raw score)
    return config.replace(labels=tuple(labels), problem_type=(
        "regression" if regression else "single_label_classification"))
  if kind == TOKENS:
    return config.replace(labels=tuple(labels), problem_type=None)
  # Spans: transformers' QA head needs two labels (start, end); choices: one score each.
  return config.replace(labels=(GENERIC_LABEL.format(0), GENERIC_LABEL.format(1)),
                        problem_type=None)


def _generic(kind: str, encoder: nn.Module, config: Any, pooling: str) -> nn.Module:
  """The family-agnostic heads (BERT's: dropout 0.1 + linear)."""
  if kind == SEQUENCE:
    return heads.SequenceClassifier(encoder, len(config.labels), pooling=pooling)
  if kind == CHOICES:
    return heads.MultipleChoice(encoder, pooling=pooling)
  if kind == TOKENS:
    return heads.TokenClassifier(encoder, len(config.labels))
  return heads.SpanExtractor(encoder)


def _continued_head(model: HFModel, kind: str, config: Any, regression,
                    label_values: tuple[str, ...] | None = None) -> dict:
  """`model`'s head, its outputs in the task's label order (and units)."""
  head = jax.tree.map(np.asarray, model.params["head"])
  if kind not in (SEQUENCE, TOKENS):
    return head
  theirs, ours = tuple(model.config.labels), tuple(config.labels)
  if regression and len(theirs) == 1:
    return _affine_output(head, 1 / regression[1], -regression[0] / regression[1])
  if label_values and sorted(theirs) == sorted(label_values) != sorted(ours):
    ours = tuple(label_values)  # named as the data spells the labels
  if not regression and len(theirs) == len(ours):
    if sorted(theirs) == sorted(ours):  # the same classes, perhaps in another order
      order = [theirs.index(label) for label in ours]
      out = head["out"]
      return {**head, "out": {"kernel": out["kernel"][:, order], "bias": out["bias"][order]}}
    if theirs == tuple(GENERIC_LABEL.format(i) for i in range(len(theirs))):
      return head  # unnamed labels: taken to be the task's, in its order
  raise ValueError(
      f"{_labels_file(model)}: its {model.architecture} head predicts {_outputs(theirs)}, "
      f"but this task needs {_outputs(ours) if not regression else 'a regression score'}. "
      "A head cannot continue on other labels: start a fresh head on its encoder with "
      "--fresh_head (Options.fresh_head = True), or start from a checkpoint fine-tuned on "
      "this task's labels.")


def _outputs(labels: tuple[str, ...]) -> str:
  return f"{len(labels)} label{'s' * (len(labels) != 1)} {list(labels)}"


def _labels_file(model: HFModel) -> str:
  """The file holding `model`'s labels (config.json's id2label, or our model record)."""
  for name in ("config.json", record.FILE, METADATA_FILE):
    if os.path.isfile(os.path.join(model.source, name)):
      return os.path.join(model.source, name)
  return model.source


def _affine_output(head: dict, scale: float, shift: float) -> dict:
  """The head with its output layer computing scale * y + shift."""
  out = head["out"]
  return {**head, "out": {"kernel": np.asarray(out["kernel"]) * scale,
                          "bias": np.asarray(out["bias"]) * scale + shift}}


def save(task: TaskModel, params: Any, directory: str, tokenizer_dir: str | None,
         source: str) -> str | None:
  """Writes `params` of `task.module` as a converted checkpoint of its transformers class
  (params/ + metadata.json + tokenizer files) into `directory`; returns the class, or
  None for generic heads (nothing is written)."""
  if task.architecture is None:
    return None
  params = jax.tree.map(np.asarray, jax.device_get(params))
  if task.regression:
    center, scale = task.regression
    params = {**params, "head": _affine_output(params["head"], scale, center)}
  model = HFModel(task.encoder.family, task.architecture, task.config, task.module, params)
  converted.save(model, directory, tokenizer_from=tokenizer_dir, source=source)
  return task.architecture
