r"""Fine-tune and evaluate a pretrained encoder on one downstream task.

  python -m bertjax.finetune.run --task=sst2 --checkpoint=CKPT_DIR --output_dir=OUT \
      [--max_train_examples=N] [--num_epochs=3] [--learning_rate=5e-5] ...

--checkpoint is a `python -m bertjax.convert` output (or a Hugging Face folder); its
tokenizer files (vocab.txt / tokenizer.json) are used unless --tokenizer is given.
Tasks: the GLUE names (cola sst2 mrpc qqp stsb mnli qnli rte wnli), squad11, squad20,
conll2003, swag; `--feature_mode=...` trains a head on frozen features instead (BERT
Table 7). The report (metrics, sizes, skipped rows, wall times, the command) is
printed and written to OUTPUT_DIR/results.json.
"""
import functools
import json
import os
import sys
import time

from absl import app, flags, logging

from bertjax.finetune import encoders, glue, loop, pipelines
from bertjax.finetune.tokenization import WordPiece


# A private flag set: `bertjax.convert` and others define the same names (--checkpoint)
# in absl's global set, and one process (a test session) may import them all.
FLAGS = flags.FlagValues()
_DEFINE_string = functools.partial(flags.DEFINE_string, flag_values=FLAGS)
_DEFINE_integer = functools.partial(flags.DEFINE_integer, flag_values=FLAGS)
_DEFINE_float = functools.partial(flags.DEFINE_float, flag_values=FLAGS)
_DEFINE_enum = functools.partial(flags.DEFINE_enum, flag_values=FLAGS)

_DEFINE_string("task", None, "Task name, e.g. sst2, stsb, mrpc, rte, squad11, conll2003.")
_DEFINE_string("checkpoint", None, "Converted checkpoint (or HF model folder) to start from.")
_DEFINE_string("tokenizer", None, "Tokenizer folder/file; default: the checkpoint's.")
_DEFINE_string("output_dir", None, "Where results.json goes.")
_DEFINE_string("data_dir", None, "Shared data folder; default bertjax.paths.data_dir().")
_DEFINE_integer("max_seq_length", 128, "Padded length of every input.")
_DEFINE_integer("batch_size", 32, "Training batch size.")
_DEFINE_integer("eval_batch_size", 64, "Prediction batch size.")
_DEFINE_float("learning_rate", 5e-5, "Peak AdamW learning rate.")
_DEFINE_float("num_epochs", 3.0, "Training epochs over the (possibly subsampled) set.")
_DEFINE_float("warmup_fraction", 0.1, "Share of steps with linear warmup.")
_DEFINE_float("weight_decay", 0.01, "AdamW weight decay (not on biases / norms).")
_DEFINE_integer("max_steps", None, "Train exactly this many steps (overrides epochs).")
_DEFINE_integer("max_train_examples", None, "Use only the first N training examples.")
_DEFINE_integer("max_eval_examples", None, "Use only the first N evaluation examples.")
_DEFINE_enum("pooling", "pooler", ["pooler", "cls", "mean"], "Sequence vector for heads.")
_DEFINE_integer("seed", 0, "Initialisation / shuffling / dropout seed.")
_DEFINE_integer("log_every", 20, "Log training metrics every N steps.")
_DEFINE_integer("doc_stride", 128, "SQuAD: tokens between window starts.")
_DEFINE_integer("max_query_length", 64, "SQuAD: question tokens kept.")
_DEFINE_integer("max_answer_length", 30, "SQuAD: longest answer span in tokens.")
_DEFINE_integer("n_best_size", 20, "SQuAD: start / end candidates per window.")
_DEFINE_string("squad_file", None, "SQuAD JSON; default the shared dev-v1.1.json.")
_DEFINE_integer("squad_train_articles", 38,
                     "SQuAD 1.1 here: train on the first N articles of the file, evaluate on "
                     "the rest (article-disjoint).")
_DEFINE_float("null_threshold", 0.0, "SQuAD 2.0: answer '' when s_null - s_best > tau.")
_DEFINE_string("feature_mode", None,
                    "Feature-based (frozen encoder) NER instead of fine-tuning: one of "
                    "embeddings, last, second_last, sum_last4, concat_last4, sum_all, or 'all'.")


def options_from_flags() -> pipelines.Options:
  finetune = loop.FinetuneConfig(
      learning_rate=FLAGS.learning_rate, warmup_fraction=FLAGS.warmup_fraction,
      batch_size=FLAGS.batch_size, num_epochs=FLAGS.num_epochs, weight_decay=FLAGS.weight_decay,
      eval_batch_size=FLAGS.eval_batch_size, seed=FLAGS.seed, log_every=FLAGS.log_every)
  return pipelines.Options(
      finetune=finetune, max_seq_length=FLAGS.max_seq_length,
      # 0 means "no limit", like leaving the flag out.
      max_train_examples=FLAGS.max_train_examples or None,
      max_eval_examples=FLAGS.max_eval_examples or None, max_steps=FLAGS.max_steps or None, pooling=FLAGS.pooling, data_dir=FLAGS.data_dir,
      doc_stride=FLAGS.doc_stride, max_query_length=FLAGS.max_query_length,
      max_answer_length=FLAGS.max_answer_length, n_best_size=FLAGS.n_best_size,
      squad_file=FLAGS.squad_file, squad_train_articles=FLAGS.squad_train_articles,
      null_threshold=FLAGS.null_threshold)


def run_task(task: str, encoder: encoders.Encoder, tokenizer: WordPiece,
             options: pipelines.Options, feature_mode: str | None = None) -> dict:
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
  raise ValueError(f"Unknown task {task!r}; use a GLUE name ({', '.join(glue.TASKS)}), "
                   f"squad11, squad20, conll2003 or swag.")


def main(argv):
  del argv
  if not FLAGS.task or not FLAGS.checkpoint:
    raise app.UsageError("--task and --checkpoint are required.")
  start = time.time()
  encoder = encoders.load(FLAGS.checkpoint)
  tokenizer = WordPiece.from_path(FLAGS.tokenizer or encoder.tokenizer_dir)
  logging.info("Encoder: %s", encoder.description)
  report = run_task(FLAGS.task, encoder, tokenizer, options_from_flags(), FLAGS.feature_mode)
  report = {"task": FLAGS.task, "encoder": encoder.description,
            "command": "python -m bertjax.finetune.run " + " ".join(sys.argv[1:]),
            **report, "wall_time_s": time.time() - start}
  summary = {k: v for k, v in report.items() if k != "history"}
  print(json.dumps(summary, indent=2, default=str))
  if FLAGS.output_dir:
    os.makedirs(FLAGS.output_dir, exist_ok=True)
    with open(os.path.join(FLAGS.output_dir, "results.json"), "w") as f:
      json.dump(report, f, indent=2, default=str)


def parse_flags(argv: list[str]) -> list[str]:
  """Parses our flags (and the global absl ones, for logging) from the command line."""
  rest = FLAGS(argv, known_only=True)
  return flags.FLAGS(rest)


if __name__ == "__main__":
  app.run(main, flags_parser=parse_flags)
