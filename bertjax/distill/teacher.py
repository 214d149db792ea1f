"""A GLUE classifier fine-tuned by `python -m bertjax.finetune.run`, reopened to score text.

A fine-tuning OUTPUT_DIR holds the best epoch's params (`{'encoder', 'head'}` under
checkpoints/) and the run's config.gin, but not the encoder's architecture: that is
the run's `FinetuneRun.init_checkpoint`, opened again with `bertjax.open_model`. The
config.gin is read with gin's parser without being applied (the caller's own gin
config stays untouched) for the task, the checkpoint, the tokenizer, the pooling and
the maximum length the teacher was trained with.
"""
import dataclasses
import os
from typing import Any, Sequence

import flax.linen as nn
import jax
import numpy as np
from flax import traverse_util
from gin import config_parser

from bertjax import batch as contract, progress
from bertjax.checkpoints import encoders, load_params
from bertjax.checkpoints.formats import open_model
from bertjax.evaluation import glue as glue_eval
from bertjax.finetune import glue, loop, task_models
from bertjax.finetune.tokenization import WordPiece

CONFIG_FILE = "config.gin"  # what bertjax.finetune.run writes into OUTPUT_DIR
# The run's settings the teacher needs: (gin binding, default when the run left it unset).
_SETTINGS = {"task": ("FinetuneRun.task", None),
             "checkpoint": ("FinetuneRun.init_checkpoint", None),
             "tokenizer": ("FinetuneRun.tokenizer", None),
             "pooling": ("Options.pooling", "pooler"),
             "max_seq_length": ("Options.max_seq_length", 128)}


class _Literals(config_parser.ParserDelegate):
  """Parses references and macros to None: only literal bindings are read."""

  def configurable_reference(self, scoped_configurable_name, evaluate):
    return None

  def macro(self, macro_name):
    return None


def read_run_config(run_dir: str) -> dict[str, Any]:
  """The `_SETTINGS` of a fine-tuning run, from its config.gin."""
  path = os.path.join(run_dir, CONFIG_FILE)
  if not os.path.isfile(path):
    raise FileNotFoundError(f"--teacher={run_dir!r} has no {CONFIG_FILE}; give the OUTPUT_DIR of "
                            "a `python -m bertjax.finetune.run` on a GLUE task.")
  with open(path) as f:
    bindings = {f"{s.selector}.{s.arg_name}": s.value
                for s in config_parser.ConfigParser(f.read(), _Literals())
                if isinstance(s, config_parser.BindingStatement)}
  settings = {name: bindings.get(binding, default)
              for name, (binding, default) in _SETTINGS.items()}
  for name in ("task", "checkpoint"):
    if settings[name] is None:
      raise ValueError(f"{path} binds no {_SETTINGS[name][0]}; is {run_dir!r} the OUTPUT_DIR of "
                       "a `python -m bertjax.finetune.run`?")
  return settings


@dataclasses.dataclass
class Teacher:
  """A fine-tuned sequence classifier with its tokenizer: `logits(texts)`."""
  task: glue_eval.GlueTask
  module: nn.Module
  params: Any
  tokenizer: WordPiece
  max_seq_length: int
  encoder: encoders.Encoder
  description: str

  @classmethod
  def from_finetune_run(cls, run_dir: str, checkpoint: str | None = None) -> "Teacher":
    """The best epoch of the fine-tuning run in `run_dir`; `checkpoint` overrides the
    base encoder the run started from (when that folder has moved)."""
    settings = read_run_config(run_dir)
    task = glue_eval.get_task(settings["task"])
    if task.is_regression:
      raise ValueError(f"--teacher={run_dir!r} was fine-tuned on {task.name}, a regression task; "
                       "logit distillation here needs a classification task.")
    model = open_model(checkpoint or settings["checkpoint"])
    encoder = encoders.base_encoder(model)
    # The classifier fine-tuning built: the family's own head (e.g. BERT's pooler, which
    # a BertForMaskedLM checkpoint lacks; DistilBERT's pre-classifier) or the generic one.
    module = task_models.build(model, task_models.SEQUENCE, task.labels,
                               pooling=settings["pooling"], fresh_head=True).module
    params, metadata = load_params(run_dir)
    _check_params(module, params, run_dir)
    tokenizer = WordPiece.from_path(settings["tokenizer"] or encoder.tokenizer_dir)
    return cls(task, module, params, tokenizer, int(settings["max_seq_length"]), encoder,
               f"{task.name} classifier (step {metadata.get('step')} of {run_dir}) over "
               f"{encoder.description}")

  def arrays(self, texts: Sequence[Sequence[str]]) -> dict[str, np.ndarray]:
    """Encoder inputs of examples given as (sentence,) or (sentence_a, sentence_b)."""
    examples = [glue_eval.PairExample(t[0], t[1] if len(t) > 1 else None, 0, "transfer set")
                for t in texts]
    arrays = glue.convert_examples(examples, self.tokenizer, self.max_seq_length)
    return self.encoder.fit_inputs(contract.select(arrays, contract.ENCODER_INPUTS))

  def logits(self, texts: Sequence[Sequence[str]], batch_size: int = 64,
             show_progress: bool | None = False, what: str = "teacher") -> np.ndarray:
    """[N, num_labels] float32 logits, in order; with `show_progress` a bar (named `what`)
    counts the texts scored (None: when stderr is a terminal)."""
    if not texts:
      return np.zeros((0, self.task.num_labels), np.float32)
    bar = progress.Progress(len(texts), desc=what, unit="text", show=show_progress)
    try:
      with bar.phase("tokenizing"):
        arrays = self.arrays(texts)
      return loop.predict(self.module, self.params, arrays, ("logits",),
                          lambda b: contract.select(b, contract.ENCODER_INPUTS), batch_size,
                          on_batch=lambda rows: bar.advance(bar.done + rows))["logits"]
    finally:
      bar.close()


def _check_params(module: nn.Module, params: Any, run_dir: str) -> None:
  """The run's params must be exactly the classifier's (a different base would load
  garbage or fail deep inside apply)."""
  ids = np.zeros((1, 8), np.int32)
  abstract = jax.eval_shape(lambda: module.init(jax.random.key(0), ids, ids, ids))["params"]
  want = {k: tuple(v.shape) for k, v in
          traverse_util.flatten_dict(nn.unbox(abstract), sep="/").items()}
  have = {k: tuple(np.shape(v)) for k, v in traverse_util.flatten_dict(params, sep="/").items()}
  if want != have:
    differ = sorted(k for k in want.keys() & have.keys() if want[k] != have[k])
    raise ValueError(
        f"The params in {run_dir} do not fit the classifier rebuilt from its config.gin: "
        f"missing {sorted(want.keys() - have.keys())[:5]}, unexpected "
        f"{sorted(have.keys() - want.keys())[:5]}, shapes differ at "
        f"{[(k, have[k], want[k]) for k in differ[:5]]} (checkpoint, model).")
