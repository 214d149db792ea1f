"""`bertjax.pipeline(task, path)`: a model folder as a function of your own text.

  classify = bertjax.pipeline("text-classification", "OUT")   # a fine-tuning's output
  classify(["a gripping film", ("a man sleeps", "a person sleeps")])
  # [{'label': 'positive', 'score': 0.93}, {'label': 'entailment', 'score': 0.88}]

`path` is any folder `bertjax.open_model` reads (a fine-tuning's OUTPUT_DIR, a converted
checkpoint, a Hugging Face or sentence-transformers folder, a pretraining run). Inputs are
laid out by the model's own tokenizer, cut to `max_seq_length` and run in batches of
`batch_size` rows through the featurizers and the batched forward pass that fine-tuning
evaluates with (`finetune.glue` / `squad` / `features`, `finetune.loop.predict`, on packed
rows where the model can pack them: `finetune.packing`), so a prediction here is the one its
evaluation scored. A call takes one input (giving one
result) or a list (giving a list). Labels come back by their names (the model's
config.json `id2label`). Outputs follow transformers' pipelines of the same names.
"""
import functools
from typing import Any, Sequence

import numpy as np

from bertjax import batch as contract
from bertjax.checkpoints.formats import open_model
from bertjax.checkpoints.model import HFModel
from bertjax.finetune import loop, tokenization
from bertjax.finetune.packing import Packing
from bertjax.hf import tasks as hf_tasks
from bertjax.models.common.config import max_positions


class Pipeline:
  """What every task shares: the opened model, its tokenizer and the batched forward pass.

  Subclasses set `task`, `architectures` (the model classes they run, by suffix; None:
  any) and `fix` (how to get such a model), and implement `predict(list of inputs)`."""
  task = ""
  architectures: tuple[str, ...] | None = None
  fix = ""

  def __init__(self, model: str | HFModel, tokenizer: str | None = None,
               batch_size: int = 32, max_seq_length: int | None = None, packing: bool = True):
    """packing: several inputs per row where the model's class can (finetune.packing);
    False: one per row."""
    self.model = model if isinstance(model, HFModel) else open_model(model, tokenizer)
    if self.architectures is not None and not self.model.architecture.endswith(
        self.architectures):
      raise ValueError(
          f"{self.model.source} holds a {self.model.architecture}; {self.task!r} runs a "
          f"model of class ...{' / ...'.join(self.architectures)}. {self.fix}")
    if batch_size < 1:
      raise ValueError(f"batch_size={batch_size}: give 1 or more rows per batch.")
    self.batch_size = batch_size
    limit = max_positions(self.model.config) or 512
    self.max_seq_length = min(max_seq_length or limit, limit)
    self._cache: dict = {}
    self.packing = Packing.choose(packing, self.model.family.name, self.model.config,
                                  kind(self.model.architecture) or "")

  @functools.cached_property
  def tokenizer(self) -> tokenization.Tokenizer:
    """The model's tokenizer with its inputs' layout (fine-tuning's featurizer)."""
    tokenizer = tokenization.Tokenizer.from_path(self.model.tokenizer_dir)
    tokenizer.check_fits(self.model.config.vocab_size, self.model.source)
    return tokenizer

  @property
  def labels(self) -> tuple[str, ...]:
    return tuple(self.model.config.labels)

  def __call__(self, inputs, **options):
    """One input -> its result; a list (or tuple of several) -> a list of results."""
    one = not isinstance(inputs, list)
    results = self.predict([inputs] if one else inputs, **options)
    return results[0] if one else results

  def predict(self, inputs: list, **options) -> list:
    raise NotImplementedError

  def forward(self, arrays: dict[str, np.ndarray], outputs: Sequence[str]) -> dict[str, np.ndarray]:
    """The model's `outputs` for every row of `arrays`, as fine-tuning evaluates them."""
    run = lambda rows, keys, untrim: loop.predict(
        self.model.module, self.model.params, rows, keys, _encoder_inputs, self.batch_size,
        self._cache, untrim=untrim)
    return self.packing.predict(run, self.model.fit_inputs(arrays), tuple(outputs))


def _encoder_inputs(batch: dict) -> dict:
  return contract.select(batch, contract.TASK_INPUTS)


def kind(architecture: str) -> str | None:
  return hf_tasks.kind_of(architecture)


def probabilities(logits: np.ndarray, problem_type: str | None) -> np.ndarray:
  """As transformers' text-classification pipeline scores: raw for regression, sigmoid
  for one output or multi-label, softmax otherwise."""
  logits = np.asarray(logits, np.float64)
  if problem_type == "regression":
    return logits
  if problem_type == "multi_label_classification" or logits.shape[-1] == 1:
    return 1 / (1 + np.exp(-logits))
  return softmax(logits)


def softmax(x: np.ndarray) -> np.ndarray:
  e = np.exp(x - x.max(-1, keepdims=True))
  return e / e.sum(-1, keepdims=True)


def as_text(value: Any, what: str) -> str:
  if not isinstance(value, str):
    raise ValueError(f"{what} must be a string; got {type(value).__name__} {value!r:.80}.")
  return value
