"""One fine-tuning run, whatever the task: its options (gin: `Options.<field>`), the fit
with evaluation after every epoch and keep-best selection, prediction (packed where the
model packs the task, `packing.Packing`) and the export of the best epoch. The task
pipelines (`pipelines`) read their data, convert it and come here.

With `Options.output_dir`, the train rows and per-epoch scores go to
OUTPUT_DIR/metrics.jsonl, OUTPUT_DIR/tensorboard/ and OUTPUT_DIR/loss_curve.png, each
evaluated epoch's params to OUTPUT_DIR/checkpoints/ while the run selects (`selection.fit`:
Orbax checkpoints, keep-best on the task's main metric), and the best model to OUTPUT_DIR
itself (then the one copy of its weights; generic heads keep checkpoints/) as a converted
checkpoint of its transformers class (params/ + metadata.json + tokenizer files:
`bertjax.open_model(OUTPUT_DIR)`, `python -m bertjax.convert --to_hf=DIR
--checkpoint=OUTPUT_DIR`).
"""
import contextlib
import dataclasses
import math
import os
import shutil
import tempfile
import time

import gin
import numpy as np
from absl import logging

from bertjax import checkpoints
from bertjax.configurables import typechecked
from bertjax.checkpoints import encoders
from bertjax.finetune import loop, packing, selection, task_models
from bertjax.train import setup as train_setup

PREDICTIONS_DIR = "predictions"
_EXAMPLES_PER_ROW = packing.DEFAULT_EXAMPLES_PER_ROW  # (Options.packing hides the module)


@dataclasses.dataclass(frozen=True)
class Options:
  """Everything a run needs besides the task and the encoder (gin: `Options.<field>`)."""
  finetune: loop.FinetuneConfig = dataclasses.field(default_factory=loop.FinetuneConfig)
  output_dir: str | None = None   # checkpoints, metrics.jsonl, predictions/; None: kept nowhere
  max_seq_length: int = 128
  max_train_examples: int | None = None  # keep the first N training examples
  max_eval_examples: int | None = None
  max_steps: int | None = None           # overrides num_epochs
  eval_each_epoch: bool = True           # False: evaluate (and select) only at the end
  predict_test: bool = True              # also predict the test split where one exists
  # "pooler": the family's transformers head; "cls" / "mean": BERT's head over raw [CLS] /
  # the mean (an ablation, not exportable).
  pooling: str = "pooler"
  fresh_head: bool = False  # a checkpoint of the task's class: train a new head anyway
  # Several examples per row (finetune.packing) where the model can pack the task; False:
  # one example per row, as before.
  packing: bool = True
  max_examples_per_row: int = _EXAMPLES_PER_ROW
  data_dir: str | None = None
  # SQuAD
  doc_stride: int = 128
  max_query_length: int = 64
  max_answer_length: int = 30
  n_best_size: int = 20
  squad_file: str | None = None
  squad_train_articles: int = 38
  null_threshold: float = 0.0

  def __post_init__(self):
    if self.max_examples_per_row < 1:
      raise ValueError(f"Options.max_examples_per_row = {self.max_examples_per_row} "
                       "(--max_examples_per_row): give 1 or more.")


Options.__init__ = typechecked(Options.__init__)
Options = gin.configurable(Options)


def num_train_steps(num_examples: int, options: Options) -> int:
  if options.max_steps:
    return options.max_steps
  per_epoch = loop.steps_per_epoch(num_examples, options.finetune.batch_size)
  return max(1, math.ceil(options.finetune.num_epochs * per_epoch))


@contextlib.contextmanager
def work_dir(options: Options, name: str = ""):
  """OUTPUT_DIR[/name] for checkpoints and metrics; a temporary folder without one."""
  if options.output_dir:
    yield os.path.join(options.output_dir, name)
  else:
    with tempfile.TemporaryDirectory(prefix="bertjax_finetune_") as tmp:
      yield tmp


def predictions_path(options: Options, *parts: str) -> str | None:
  return os.path.join(options.output_dir, PREDICTIONS_DIR, *parts) if options.output_dir else None


def fit(model, objective, arrays, init: dict, options: Options,
        evaluate: selection.Evaluate, metric: str, name: str = "",
        frozen: tuple[str, ...] = (), banner: str | None = None,
        packer: packing.Packing | None = None
        ) -> tuple[loop.Finetuner, selection.Selection, dict]:
  """Fine-tunes with evaluation after each epoch; the finetuner ends on the best epoch.

  init: the weights to start from, {'encoder': ..., 'head': ...} (either may be absent);
  banner: what is fine-tuned on what, printed with the run's size before it starts;
  packer: trains on packed rows when enabled (batches of about as many examples)."""
  n = loop.num_rows(arrays)
  config, packed_report = options.finetune, None
  if packer is not None:
    packed_report = packer.report(arrays, config.seed)
    logging.info("Packing of the training rows: %s", packed_report)
  if packer is not None and packer.enabled:
    # Rows per batch split as the unpacked batch would: over microbatches and devices.
    devices = train_setup.data_parallel_mesh(*config.split_rows).devices.size
    arrays, rows_per_batch = packer.train_rows(arrays, config.batch_size,
                                               config.num_microbatches * devices, config.seed)
    config = dataclasses.replace(config, batch_size=rows_per_batch)
  steps = num_train_steps(loop.num_rows(arrays), dataclasses.replace(options, finetune=config))
  if banner:
    rows = (f"{n} training examples in {loop.num_rows(arrays)} packed rows" if n !=
            loop.num_rows(arrays) else f"{n} training rows")
    print(f"{banner}: {rows}, {steps} steps of batch {config.batch_size}, "
          f"peak learning rate {config.learning_rate:g}.", flush=True)
  start = time.time()
  tuner = loop.Finetuner(model, objective, arrays, config, steps, init.get("encoder"),
                         frozen=frozen, head_params=init.get("head"))
  with work_dir(options, name) as directory:
    chosen = selection.fit(tuner, arrays, steps, evaluate, metric, directory,
                           options.eval_each_epoch, tensorboard=bool(options.output_dir),
                           loss_curve=bool(options.output_dir),
                           resumable=bool(options.output_dir))
  report = {"train_rows": n, "train_steps": steps, "history": chosen.train_history,
            "train_time_s": time.time() - start, **chosen.report(), "eval": chosen.scores}
  if packed_report is not None:
    report["packing"] = {"train": packed_report}
  return tuner, chosen, report


def choose_packer(model: encoders.Encoder, kind: str, options: Options) -> packing.Packing:
  """How `model` runs `kind`: packed if options.packing and its family can (else why not)."""
  chosen = packing.Packing.choose(options.packing, model.family.name, model.config, kind,
                                  options.max_examples_per_row)
  if options.packing and not chosen.enabled:
    logging.warning("Running unpacked: %s.", chosen.reason)
  return chosen


def predict(tuner: loop.Finetuner, packer: packing.Packing, arrays,
            output_keys: tuple[str, ...]) -> dict[str, np.ndarray]:
  """The tuner's outputs for every (unpacked) row of `arrays`, run packed when it packs."""
  return packer.predict(lambda rows, keys, untrim: tuner.predict(rows, keys, untrim=untrim),
                        arrays, output_keys)


def fit_task(task: task_models.TaskModel, objective, arrays, options: Options,
             evaluate: selection.Evaluate, metric: str, what: str,
             packer: packing.Packing | None = None):
  """`fit` of a task model; with an output_dir, the best epoch's model is saved there as a
  converted checkpoint of its transformers class (`what` says where it came from), the
  one copy of its weights: the selection's checkpoint is removed once it is written."""
  tuner, chosen, report = fit(
      task.module, objective, arrays, task.start, options, evaluate, metric,
      banner=f"Fine-tuning {task.description} on {what} from {task.encoder.description}",
      packer=packer)
  report["model"] = task.description
  if options.output_dir:
    exported = task_models.save(task, tuner.params, options.output_dir,
                                task.encoder.tokenizer_dir,
                                f"{what}, fine-tuned from {task.encoder.description}")
    report["exported_as"] = exported
    if exported:
      shutil.rmtree(os.path.join(options.output_dir, checkpoints.RUN_SUBDIR))
  return tuner, chosen, report

