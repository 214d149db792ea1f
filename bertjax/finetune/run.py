r"""Fine-tune and evaluate a pretrained encoder on one downstream task, from gin.

  python -m bertjax.finetune.run --gin_file=gin/finetune/glue_mrpc.gin \
      --checkpoint=CKPT_DIR --output_dir=OUT [--gin_bindings="FinetuneConfig.learning_rate = 2e-5"]
  python -m bertjax.finetune.run --task=sst2 --checkpoint=CKPT_DIR --output_dir=OUT \
      [--max_train_examples=N] [--num_epochs=3] [--learning_rate=5e-5] ...

gin binds three dataclasses: `FinetuneRun` (task, init_checkpoint, tokenizer,
feature_mode), `Options` (data, lengths, SQuAD settings, output_dir) and
`FinetuneConfig` (BERT's recipe: lr, batch, epochs, warmup). gin/finetune/ holds one
file per benchmark over base.gin. Every other flag is a shorthand for one binding
(listed in `FLAG_BINDINGS`), applied after the gin files and --gin_bindings (alias
--gin_param), so the dataclasses' defaults and the gin files stay the one source of values. Bad bindings
(unknown names, wrong types, a missing task / checkpoint) fail before anything loads.

--checkpoint (FinetuneRun.init_checkpoint) is a `python -m bertjax.convert` output, a
Hugging Face folder, or a `python -m bertjax.main` model_dir (which keeps the vocabulary
it trained on); its tokenizer files are used unless --tokenizer is given. Inputs are laid
out as that tokenizer lays them out (BERT's [CLS] A [SEP] B [SEP], RoBERTa's
<s> A </s></s> B </s>, XLNet's A <sep> B <sep> <cls> padded on the left...).
Tasks: the GLUE names (cola sst2 mrpc qqp stsb mnli qnli rte wnli), squad11, squad20,
conll2003, swag; `--feature_mode=...` trains a head on frozen features instead (BERT
Table 7). OUTPUT_DIR gets results.json (metrics of every epoch, the best one, sizes,
skipped rows, wall times, the command), metrics.jsonl, loss_curve.png, config.gin and
predictions/ in each benchmark's submission format, and is itself a
converted checkpoint of the trained transformers task class (BertForSequenceClassification,
...): `python -m bertjax.convert --to_hf=DIR --checkpoint=OUTPUT_DIR` exports it, and
--checkpoint=OUTPUT_DIR fine-tunes it further (its head continues on the same labels).
"""
import dataclasses
import functools
import json
import os
import sys
import time

import gin
from absl import flags, logging

from bertjax import cli, configurables, paths, run_lock
from bertjax.configurables import typechecked
from bertjax.checkpoints import encoders
from bertjax.checkpoints.formats import open_model
from bertjax.evaluation import glue
from bertjax.finetune import feature_based, fitting, loop, pipelines, resume, tokenization
from bertjax import files
from bertjax.layers.embeddings import check_length
from bertjax.models.common.config import max_positions
from bertjax.train import preemption
from bertjax.train.loop import NonFiniteLossError

TASKS = tuple(glue.TASKS) + ("squad11", "squad20", "conll2003", "swag")


@dataclasses.dataclass(frozen=True)
class FinetuneRun:
  """What to fine-tune on what (gin: `FinetuneRun.<field>`)."""
  task: str = gin.REQUIRED
  init_checkpoint: str = gin.REQUIRED
  tokenizer: str | None = None     # default: the checkpoint's tokenizer files
  feature_mode: str | None = None  # feature-based CoNLL-2003 (a feature_based.MODES or 'all')

  def __post_init__(self):
    if self.task not in TASKS:
      raise ValueError(f"gin binding FinetuneRun.task = {self.task!r}: use one of {TASKS}.")
    modes = feature_based.MODES + ("all",)
    if self.feature_mode is not None:
      if self.feature_mode not in modes:
        raise ValueError(f"gin binding FinetuneRun.feature_mode = {self.feature_mode!r}: use "
                         f"one of {modes}.")
      if self.task != "conll2003":
        raise ValueError("FinetuneRun.feature_mode is implemented for task 'conll2003' "
                         "(BERT Table 7).")


FinetuneRun.__init__ = typechecked(FinetuneRun.__init__)
FinetuneRun = gin.configurable(FinetuneRun)

# A private flag set: `bertjax.convert` and others define the same names (--checkpoint)
# in absl's global set, and one process (a test session) may import them all.
FLAGS = flags.FlagValues()
_DEFINE_string = functools.partial(flags.DEFINE_string, flag_values=FLAGS)
_DEFINE_integer = functools.partial(flags.DEFINE_integer, flag_values=FLAGS)
_DEFINE_float = functools.partial(flags.DEFINE_float, flag_values=FLAGS)
_DEFINE_enum = functools.partial(flags.DEFINE_enum, flag_values=FLAGS)

flags.DEFINE_multi_string("gin_file", [], "gin file(s), applied in order (also looked up "
                          "under the repository's gin/ folder).", flag_values=FLAGS)
flags.DEFINE_multi_string("gin_bindings", [], "gin bindings, applied after the files.",
                          flag_values=FLAGS)
cli.alias("gin_param", "gin_bindings", FLAGS)

# Shorthand flags: each sets one gin binding when given (None = not given).
_DEFINE_string("task", None, "FinetuneRun.task, e.g. sst2, stsb, mrpc, rte, squad11, conll2003.")
_DEFINE_string("checkpoint", None, "FinetuneRun.init_checkpoint: weights to start from.")
_DEFINE_string("tokenizer", None, "FinetuneRun.tokenizer: folder/file; default the checkpoint's.")
_DEFINE_string("feature_mode", None,
               "FinetuneRun.feature_mode: feature-based (frozen encoder) NER: one of "
               "embeddings, last, second_last, sum_last4, concat_last4, sum_all, or 'all'.")
_DEFINE_string("output_dir", None, "Options.output_dir: results, checkpoints, predictions.")
cli.alias("model_dir", "output_dir", FLAGS)
flags.DEFINE_boolean("overwrite", False, "Replace an existing --output_dir (never the checkpoint "
                     "or tokenizer the run reads).", flag_values=FLAGS)
_DEFINE_string("data_dir", None, "Options.data_dir; default bertjax.paths.data_dir().")
_DEFINE_integer("max_seq_length", None, "Options.max_seq_length: padded length of inputs.")
_DEFINE_integer("max_train_examples", None, "Options.max_train_examples (0: all).")
_DEFINE_integer("max_eval_examples", None, "Options.max_eval_examples (0: all).")
_DEFINE_integer("max_steps", None, "Options.max_steps: train exactly N steps (0: by epochs).")
_DEFINE_enum("pooling", None, ["pooler", "cls", "mean"],
             "Options.pooling: 'pooler' = the family's transformers head; 'cls' / 'mean' = "
             "BERT's head over raw [CLS] / the mean (not exportable).")
flags.DEFINE_boolean("fresh_head", None, "Options.fresh_head: a new head even when the "
                     "checkpoint is the task's class with a head for its labels.",
                     flag_values=FLAGS)
flags.DEFINE_boolean("packing", None, "Options.packing: several examples per row (no compute "
                     "on padding) where the model can; --packing=false: one example per row.",
                     flag_values=FLAGS)
_DEFINE_integer("max_examples_per_row", None,
                "Options.max_examples_per_row: the most examples a packed row holds.")
_DEFINE_integer("doc_stride", None, "Options.doc_stride: SQuAD tokens between windows.")
_DEFINE_integer("max_query_length", None, "Options.max_query_length: SQuAD question tokens.")
_DEFINE_integer("max_answer_length", None, "Options.max_answer_length: SQuAD span tokens.")
_DEFINE_integer("n_best_size", None, "Options.n_best_size: SQuAD candidates per window.")
_DEFINE_string("squad_file", None, "Options.squad_file; default the shared dev-v1.1.json.")
_DEFINE_integer("squad_train_articles", None,
                "Options.squad_train_articles: train on the first N articles of the file, "
                "evaluate on the rest (article-disjoint).")
_DEFINE_float("null_threshold", None, "Options.null_threshold: SQuAD 2.0 tau.")
_DEFINE_integer("batch_size", None, "FinetuneConfig.batch_size: training batch.")
_DEFINE_integer("eval_batch_size", None, "FinetuneConfig.eval_batch_size.")
_DEFINE_float("learning_rate", None, "FinetuneConfig.learning_rate: peak AdamW rate.")
_DEFINE_float("num_epochs", None, "FinetuneConfig.num_epochs.")
_DEFINE_float("warmup_fraction", None, "FinetuneConfig.warmup_fraction.")
_DEFINE_float("weight_decay", None, "FinetuneConfig.weight_decay.")
_DEFINE_integer("seed", None, "FinetuneConfig.seed: init / shuffling / dropout.")
_DEFINE_integer("log_every", None, "FinetuneConfig.log_every: steps between train logs.")

FLAG_BINDINGS = {
    "task": "FinetuneRun.task", "checkpoint": "FinetuneRun.init_checkpoint",
    "tokenizer": "FinetuneRun.tokenizer", "feature_mode": "FinetuneRun.feature_mode",
    **{name: f"Options.{name}" for name in (
        "output_dir", "data_dir", "max_seq_length", "max_train_examples", "max_eval_examples",
        "max_steps", "pooling", "fresh_head", "packing", "max_examples_per_row", "doc_stride",
        "max_query_length", "max_answer_length",
        "n_best_size", "squad_file", "squad_train_articles", "null_threshold")},
    **{name: f"FinetuneConfig.{name}" for name in (
        "batch_size", "eval_batch_size", "learning_rate", "num_epochs", "warmup_fraction",
        "weight_decay", "seed", "log_every")},
}
_ZERO_MEANS_NONE = ("max_train_examples", "max_eval_examples", "max_steps")


def flag_bindings() -> list[str]:
  """The gin bindings of the shorthand flags that were given."""
  bindings = []
  for flag, parameter in FLAG_BINDINGS.items():
    value = FLAGS[flag].value
    if value is None:
      continue
    if flag in _ZERO_MEANS_NONE and value == 0:
      value = None
    bindings.append(f"{parameter} = {value!r}")
  return bindings


def configure(gin_files: list[str], gin_params: list[str]) -> tuple[FinetuneRun, fitting.Options]:
  """Parses the config and builds it: every bad binding raises here, before any compute."""
  configurables.parse_config(gin_files, gin_params)
  return FinetuneRun(), fitting.Options(finetune=loop.FinetuneConfig())


def run_task(task: str, encoder: encoders.Encoder, tokenizer: tokenization.Tokenizer,
             options: fitting.Options, feature_mode: str | None = None) -> dict:
  if feature_mode:
    if task != "conll2003":
      raise ValueError("--feature_mode is implemented for --task=conll2003 (BERT Table 7).")
    return pipelines.run_feature_based(encoder, tokenizer, options, feature_mode)
  if task in glue.TASKS:
    return pipelines.run_glue(task, encoder, tokenizer, options)
  if task in ("squad11", "squad20"):
    return pipelines.run_squad(task, encoder, tokenizer, options)
  if task == "conll2003":
    return pipelines.run_ner(encoder, tokenizer, options)
  if task == "swag":
    return pipelines.run_swag(encoder, tokenizer, options)
  raise ValueError(f"Unknown task {task!r}; use one of {TASKS}.")


def main(argv):
  del argv
  start = time.time()
  try:
    config, options = configure(FLAGS.gin_file, FLAGS.gin_bindings + flag_bindings())
  except (ValueError, IOError, SyntaxError) as e:
    sys.exit(f"Bad fine-tuning config: {e}")
  run(config, options, start, overwrite=FLAGS.overwrite)


def run(config: FinetuneRun, options: fitting.Options, start: float | None = None,
        overwrite: bool = False) -> dict:
  """Loads the encoder, runs the task, prints and writes the report (and returns it).
  An existing output_dir is refused unless `overwrite` (bertjax.output_paths), or resumed
  when it holds this same fine-tuning stopped by SIGTERM / SIGINT (finetune.resume)."""
  start = time.time() if start is None else start
  model, encoder, tokenizer = open_for_finetuning(config.init_checkpoint, config.tokenizer,
                                                 options)
  if not options.output_dir:
    return _run(config, options, model, encoder, tokenizer, start)
  # A folder holding this same fine-tuning, stopped by SIGTERM / SIGINT, is resumed; one
  # process at a time (run_lock), so that two reruns never resume it both.
  resume.claim(options.output_dir, "--output_dir", overwrite,
               reads=[config.init_checkpoint, config.tokenizer], config=gin.config_str())
  os.makedirs(options.output_dir, exist_ok=True)
  with run_lock.hold(options.output_dir, "fine-tuning"):
    with open(os.path.join(options.output_dir, resume.CONFIG_FILE), "w") as f:
      f.write(gin.config_str())
    return _run(config, options, model, encoder, tokenizer, start)


def _run(config: FinetuneRun, options: fitting.Options, model, encoder, tokenizer,
         start: float) -> dict:
  # The whole model: a checkpoint of the task's class continues with its head.
  report = run_task(config.task, model, tokenizer, options, config.feature_mode)
  return finish(report, config.task, encoder.description, options, start,
                "python -m bertjax.finetune.run " + " ".join(sys.argv[1:]))


def open_for_finetuning(checkpoint: str, tokenizer: str | None, options: fitting.Options
                        ) -> tuple[encoders.Encoder, encoders.Encoder, tokenization.Tokenizer]:
  """(the model at `checkpoint`: any folder open_model reads, its bare encoder, its
  tokenizer or the one at `tokenizer`), checked against each other and
  `options.max_seq_length`."""
  model = open_model(checkpoint, _folder_of(tokenizer))
  encoder = encoders.base_encoder(model)
  limit = max_positions(encoder.config)
  check_length(options.max_seq_length, limit, "Options.max_seq_length (--max_seq_length)",
               f"Pass --max_seq_length <= {limit}, the encoder's position table")
  files.check_tokenizer_files(tokenizer or encoder.tokenizer_dir)
  logging.info("Encoder: %s", encoder.description)
  return model, encoder, tokenization.for_model(encoder, tokenizer)


def finish(report: dict, task: str, encoder: str, options: fitting.Options, start: float,
           command: str) -> dict:
  """The run's report with what ran, printed (less its per-step history) and written to
  OUTPUT_DIR/results.json."""
  report = {"task": task, "encoder": encoder,
            "command": command, **report, "wall_time_s": time.time() - start}
  summary = {k: v for k, v in report.items() if k not in ("history", "epochs")}
  print(json.dumps(summary, indent=2, default=str))
  if options.output_dir:
    paths.write_atomic(os.path.join(options.output_dir, "results.json"),
                       json.dumps(report, indent=2, default=str))
  return report


def _folder_of(tokenizer: str | None) -> str | None:
  """The folder of --tokenizer's files (saved with the fine-tuned model)."""
  if tokenizer is None or os.path.isdir(tokenizer):
    return tokenizer
  return os.path.dirname(os.path.abspath(tokenizer))


def cli_main(argv):
  """main, with bad input and a diverging run reported in one line (exit status 1), and a
  run stopped by SIGTERM / SIGINT with its state saved by 143 / 130 (`finetune.resume`)."""
  try:
    main(argv)
  except (ValueError, FileNotFoundError, NonFiniteLossError, run_lock.LockError) as e:
    sys.exit(f"python -m bertjax.finetune.run: {e}")
  except preemption.Preempted as e:
    print(e, file=sys.stderr, flush=True)
    sys.exit(e.exit_status)


def command() -> None:
  """`bertjax finetune` / `python -m bertjax.finetune.run`."""
  try:
    cli.run(cli_main, __doc__, FLAGS)
  finally:
    FLAGS.unparse_flags()  # a test process may run the command again


if __name__ == "__main__":
  command()
