r"""Distil a fine-tuned BERT classifier into Tang et al. (2019)'s BiLSTM (or a small
Transformer, --architecture=transformer), or train the student on the labels alone for
comparison.

  python -m bertjax.finetune.run --gin_file=finetune/glue_sst2.gin --checkpoint=CKPT \
      --output_dir=TEACHER                                   # the teacher
  python -m bertjax.distill.student --task=sst2 --targets=labels --out=OUT_A
  python -m bertjax.distill.student --teacher=TEACHER --targets=teacher --out=OUT_B
  python -m bertjax.distill.student --teacher=TEACHER --targets=teacher --augment --out=OUT_C

--teacher is the OUTPUT_DIR of a GLUE classification fine-tuning run (its best epoch;
bertjax.distill.teacher); the task defaults to its task. The transfer set is the
task's training examples (the first --max_train_examples), with --augment also up to
--copies augmented copies of each (masking, POS-guided replacement, n-gram sampling:
bertjax.data.augment; POS tags from a lexicon learnt from CoNLL-2003's POS column:
bertjax.data.pos_lexicon). With --targets=teacher the teacher scores every example and
the student regresses its logits (L = a CE + (1 - a) ||z_t - z_s||^2, a =
--label_weight, 0 by default as in the paper: bertjax.objectives.distill.LogitRegression);
--targets=labels trains on the gold labels alone (augmentation needs a teacher: the
copies have no labels). The word vocabulary is built from the transfer set.

Scoring the transfer set is the costly part: --transfer_only scores it once into --out
(transfer.jsonl with the student's words and the teacher's logits, teacher.json with the
teacher's dev scores and logits) and trains nothing; students of any architecture and
seed then read it with --transfer_from=THAT_OUT (its augmented copies only with --augment),
so the augmentation is drawn once, as in the paper, and the seeds vary the student alone.

Both students read the same word ids: the BiLSTM (bertjax.models.bilstm, the paper's
sizes by default) or BERT's encoder over words, trained from scratch
(bertjax.models.word_transformer; --layers, --heads, --width, --ffn).

Training runs fine-tuning's machinery (bertjax.finetune.loop.Finetuner: the shared train
step and loop, AdamW, metric rows) with dev evaluation after every epoch and the best
epoch kept (bertjax.finetune.selection). OUT gets the transfer set with the teacher's logits
(transfer.jsonl and teacher.json; not with --transfer_from), the student (params/, metadata.json, words.txt:
bertjax.distill.student_checkpoint), metrics.jsonl and results.json.
"""
import contextlib
import dataclasses
import functools
import json
import os
import sys
import tempfile
import time

import jax
import numpy as np
from absl import flags

from bertjax import output_paths, paths
from bertjax.data import augment
from bertjax.data.pos_lexicon import PosLexicon
from bertjax.data.word_vocabulary import WordVocabulary
from bertjax.distill import cli, student_checkpoint, transfer
from bertjax.distill.teacher import Teacher, read_run_config
from bertjax.evaluation import glue as glue_eval, readers
from bertjax.finetune import loop, selection
from bertjax.models.bilstm import POOLINGS, BiLSTMConfig
from bertjax.models.word_transformer import WordTransformerConfig
from bertjax.objectives.distill import LogitRegression
from bertjax.train import loop as train_loop

TARGETS = ("labels", "teacher")
TRANSFER_FILE = "transfer.jsonl"
TEACHER_FILE = "teacher.json"  # the teacher's description, dev scores and dev logits

# A private flag set, as bertjax.finetune.run's: other CLIs define some of these names.
FLAGS = flags.FlagValues()
_string = functools.partial(flags.DEFINE_string, flag_values=FLAGS)
_integer = functools.partial(flags.DEFINE_integer, flag_values=FLAGS)
_float = functools.partial(flags.DEFINE_float, flag_values=FLAGS)
_bool = functools.partial(flags.DEFINE_bool, flag_values=FLAGS)
_enum = functools.partial(flags.DEFINE_enum, flag_values=FLAGS)

_string("task", None, "GLUE classification task (default: the teacher's).")
_string("teacher", None, "OUTPUT_DIR of `python -m bertjax.finetune.run` (a GLUE classifier).")
_string("teacher_checkpoint", None, "The teacher's base encoder, when it moved since the run "
        "(default: the run's FinetuneRun.init_checkpoint).")
_string("transfer_from", None, "The --out of an earlier --transfer_only run: train on its "
        "scored transfer set (its augmented copies only with --augment) instead of scoring.")
_bool("transfer_only", False, "Build and score the transfer set into --out, train nothing "
      "(students then read it with --transfer_from).")
_enum("targets", "teacher", list(TARGETS), "Train on the teacher's logits or the gold labels.")
_float("label_weight", 0.0, "With --targets=teacher: weight a of CE(labels) in "
       "a CE + (1 - a) MSE(logits) (the paper: 0).")
_bool("augment", False, "Add augmented copies of each training example (needs a teacher).")
_integer("copies", 20, "Augmented copies drawn per example (the paper's n_iter; duplicates "
         "dropped).")
_float("p_mask", 0.1, "Per word: probability of [MASK].")
_float("p_pos", 0.1, "Per word: probability of a same-POS replacement.")
_float("p_ngram", 0.25, "Per copy: probability of keeping only a random n-gram.")
_integer("max_ngram", 5, "n-grams of 1..max_ngram words.")
_string("data_dir", None, "Data folder (glue/, conll2003/); default bertjax.paths.data_dir().")
_integer("max_train_examples", 0, "Keep the first N training examples (0: all).")
_integer("max_eval_examples", 0, "Keep the first N dev examples (0: all).")
_string("out", None, "Where the student, metrics.jsonl and results.json go.")
_bool("overwrite", False, "Replace an existing --out folder (never one the run reads).")
flags.DEFINE_alias("output_dir", "out", flag_values=FLAGS)
_integer("max_length", 64, "Words per sentence (longer ones are truncated).")
_integer("min_count", 1, "Vocabulary: words seen at least this often in the transfer set.")
_enum("architecture", "bilstm", list(student_checkpoint.FAMILIES),
      "The student: Tang et al.'s BiLSTM or a small Transformer over the same words.")
_integer("embedding_size", 300, "BiLSTM: word embedding size (the paper: 300).")
_integer("hidden_size", 150, "BiLSTM: LSTM units per direction (the paper: 150).")
_integer("mlp_size", 200, "BiLSTM: ReLU layer before the logits (the paper: 200).")
_enum("pooling", "max", list(POOLINGS), "BiLSTM: sentence vector: max over words or final "
      "states.")
_integer("layers", 2, "Transformer: layers.")
_integer("heads", 4, "Transformer: attention heads.")
_integer("width", 256, "Transformer: hidden size (= its word embedding size).")
_integer("ffn", 1024, "Transformer: feed-forward size.")
_float("dropout_rate", 0.1, "Dropout (BiLSTM: before and after the ReLU layer; Transformer: "
       "BERT's, and before the logits).")
_integer("batch_size", 50, "Training batch.")
_integer("eval_batch_size", 256, "Student prediction batch.")
_integer("teacher_batch_size", 64, "Teacher scoring batch.")
_float("learning_rate", 1e-3, "Peak AdamW learning rate.")
_float("warmup_fraction", 0.05, "Linear warmup, then linear decay to 0.")
_float("weight_decay", 0.0, "AdamW weight decay.")
_float("num_epochs", 3.0, "Passes over the transfer set.")
_integer("max_steps", 0, "Train exactly N steps (0: by epochs).")
_integer("seed", 0, "Augmentation, initialisation, shuffling and dropout seed.")
_integer("log_every", 50, "Steps between training metric rows.")
_enum("on_nonfinite", "stop", list(train_loop.NONFINITE_MODES), "A NaN/Inf step: stop or skip.")


def log(message: str) -> None:
  print(time.strftime("%H:%M:%S"), message, flush=True)


def check_flags() -> None:
  """Bad combinations fail before anything loads."""
  if FLAGS.transfer_from and FLAGS.teacher:
    raise ValueError("Give --teacher (score a transfer set now) or --transfer_from (one scored "
                     "before), not both.")
  if FLAGS.targets == "teacher" and not (FLAGS.teacher or FLAGS.transfer_from):
    raise ValueError("--targets=teacher needs --teacher=OUTPUT_DIR (a fine-tuning run) or "
                     "--transfer_from=DIR; or pass --targets=labels.")
  if FLAGS.augment and FLAGS.targets != "teacher":
    raise ValueError("--augment needs --targets=teacher: augmented copies have no labels, the "
                     "teacher scores them.")
  if not (FLAGS.task or FLAGS.teacher or FLAGS.transfer_from):
    raise ValueError("Give --task (a GLUE classification task) or --teacher.")
  if FLAGS.transfer_only and not (FLAGS.out and FLAGS.teacher and FLAGS.targets == "teacher"):
    raise ValueError("--transfer_only writes the teacher-scored transfer set: it needs --out, "
                     "--teacher and --targets=teacher.")
  if not 0.0 <= FLAGS.label_weight <= 1.0:
    raise ValueError(f"--label_weight={FLAGS.label_weight}: must be in [0, 1].")
  if FLAGS.out:
    output_paths.claim_folder(FLAGS.out, "--out", FLAGS.overwrite, reads=[
        FLAGS.teacher, FLAGS.teacher_checkpoint, FLAGS.transfer_from, FLAGS.data_dir])


def _task(teacher_task: str | None, source: str) -> glue_eval.GlueTask:
  name = FLAGS.task or teacher_task
  if teacher_task and name != teacher_task:
    raise ValueError(f"--task={name} but {source} is for {teacher_task}.")
  task = glue_eval.get_task(name)
  if task.is_regression:
    raise ValueError(f"--task={name} is a regression task; the student classifies.")
  return task


def _augmenter(train) -> augment.Augmenter:
  config = augment.AugmentConfig(FLAGS.p_mask, FLAGS.p_pos, FLAGS.p_ngram, FLAGS.max_ngram,
                                 FLAGS.copies)
  corpus = [side for example in train for side in transfer.example_words(example)]
  return augment.Augmenter(config, PosLexicon.from_conll(data_dir=FLAGS.data_dir), corpus)


def _student_config(vocab_size: int, num_labels: int, pair: bool):
  if FLAGS.architecture == "transformer":
    return WordTransformerConfig(vocab_size, num_labels, FLAGS.width, FLAGS.layers, FLAGS.heads,
                                 FLAGS.ffn, FLAGS.max_length, pair, FLAGS.dropout_rate)
  return BiLSTMConfig(vocab_size, num_labels, FLAGS.embedding_size, FLAGS.hidden_size,
                      FLAGS.mlp_size, FLAGS.pooling, pair=pair, hidden_dropout=FLAGS.dropout_rate)


@dataclasses.dataclass
class Scored:
  """What the student learns from and is judged on."""
  task: glue_eval.GlueTask
  train_examples: int
  examples: transfer.TransferSet             # the transfer set (teacher logits when scored)
  dev: list                                  # the dev split's examples
  teacher: dict | None = None                # description, params, dev scores
  teacher_dev_logits: np.ndarray | None = None
  teacher_dir: str | None = None
  skips: readers.SkipLog = dataclasses.field(default_factory=readers.SkipLog)


def _score(times: dict) -> Scored:
  """Reads the task, builds the transfer set and, with --teacher, scores it."""
  teacher_task = read_run_config(FLAGS.teacher)["task"] if FLAGS.teacher else None
  task = _task(teacher_task, f"--teacher={FLAGS.teacher}")
  skips = readers.SkipLog()
  train = glue_eval.read_examples(task, "train", skips, FLAGS.data_dir,
                                  FLAGS.max_train_examples or None)
  dev_split = task.eval_splits[0]
  dev = glue_eval.read_examples(task, dev_split, skips, FLAGS.data_dir,
                                FLAGS.max_eval_examples or None)
  began = time.time()
  examples = transfer.build(train, _augmenter(train) if FLAGS.augment else None, FLAGS.seed)
  times["augment_s"] = time.time() - began
  log(f"transfer set: {len(train)} {task.name} train examples + {examples.num_augmented} "
      f"augmented")
  scored = Scored(task, len(train), examples, dev, teacher_dir=FLAGS.teacher, skips=skips)
  if FLAGS.teacher:
    began = time.time()
    teacher = Teacher.from_finetune_run(FLAGS.teacher, FLAGS.teacher_checkpoint)
    log(f"teacher: {teacher.description}")
    scored.teacher_dev_logits = teacher.logits(transfer.build(dev).texts,
                                               FLAGS.teacher_batch_size, None,
                                               f"teacher on {dev_split}")
    scored.teacher = {"description": teacher.description,
                      "params": cli.count_params(teacher.params),
                      dev_split: glue_eval.evaluate(task, scored.teacher_dev_logits,
                                                    [e.label for e in dev])}
    if FLAGS.targets == "teacher":
      scored.examples = transfer.with_teacher(
          examples, teacher.logits(examples.texts, FLAGS.teacher_batch_size, None,
                                   "teacher on the transfer set"))
    times["teacher_s"] = time.time() - began
    log(f"teacher scored {len(examples) if FLAGS.targets == 'teacher' else 0} transfer and "
        f"{len(dev)} dev examples in {times['teacher_s']:.0f}s; teacher dev: "
        f"{scored.teacher[dev_split]}")
  return scored


def _save_scored(scored: Scored, directory: str) -> None:
  """The transfer set (TRANSFER_FILE) and the teacher's dev logits (TEACHER_FILE)."""
  os.makedirs(directory, exist_ok=True)
  transfer.save_jsonl(scored.examples, os.path.join(directory, TRANSFER_FILE))
  if scored.teacher is not None:
    saved = {"task": scored.task.name, "teacher_dir": scored.teacher_dir,
                 "train_examples": scored.train_examples,
                 "augmented": scored.examples.num_augmented, "seed": FLAGS.seed,
                 "teacher": scored.teacher,
                 "dev_logits": np.asarray(scored.teacher_dev_logits).tolist()}
    paths.write_atomic(os.path.join(directory, TEACHER_FILE), json.dumps(saved))


def _load_scored() -> Scored:
  """The transfer set and teacher scores an earlier --transfer_only run wrote: every
  training row, and with --augment its augmented copies too."""
  path = os.path.join(FLAGS.transfer_from, TEACHER_FILE)
  if not os.path.isfile(path):
    raise FileNotFoundError(f"--transfer_from={FLAGS.transfer_from!r} has no {TEACHER_FILE}; "
                            "give the --out of `python -m bertjax.distill.student "
                            "--transfer_only`.")
  with open(path) as f:
    saved = json.load(f)
  task = _task(saved["task"], f"--transfer_from={FLAGS.transfer_from}")
  if FLAGS.max_train_examples and FLAGS.max_train_examples != saved["train_examples"]:
    raise ValueError(f"--max_train_examples={FLAGS.max_train_examples}, but the transfer set in "
                     f"{FLAGS.transfer_from} holds {saved['train_examples']} training rows.")
  if FLAGS.augment and not saved["augmented"]:
    raise ValueError(f"--augment, but the transfer set in {FLAGS.transfer_from} has no "
                     "augmented copies; score one with --transfer_only --augment.")
  examples = transfer.load_jsonl(os.path.join(FLAGS.transfer_from, TRANSFER_FILE))
  if not FLAGS.augment:
    examples = transfer.originals(examples)
  skips = readers.SkipLog()
  dev = glue_eval.read_examples(task, task.eval_splits[0], skips, FLAGS.data_dir,
                                FLAGS.max_eval_examples or None)
  logits = np.asarray(saved["dev_logits"], np.float32)
  if len(logits) != len(dev):
    raise ValueError(f"The teacher in {FLAGS.transfer_from} scored {len(logits)} dev examples, "
                     f"this run reads {len(dev)}: pass the same --max_eval_examples.")
  log(f"transfer set from {FLAGS.transfer_from}: {len(examples)} rows "
      f"({examples.num_augmented} augmented)")
  return Scored(task, saved["train_examples"], examples, dev, saved["teacher"], logits,
                saved["teacher_dir"], skips)


def run() -> dict:
  """Builds (or reads) the transfer set, trains and selects the student; returns the report."""
  check_flags()
  start, times = time.time(), {}
  scored = _load_scored() if FLAGS.transfer_from else _score(times)
  task, examples, dev = scored.task, scored.examples, scored.dev
  dev_split = task.eval_splits[0]
  teacher_dev_logits = scored.teacher_dev_logits
  report = {"task": task.name, "targets": FLAGS.targets, "augment": FLAGS.augment,
            "architecture": FLAGS.architecture}
  if scored.teacher is not None:
    report["teacher"] = scored.teacher
  if FLAGS.transfer_from:
    report["transfer_from"] = FLAGS.transfer_from
  elif FLAGS.out:  # the transfer set as the student sees it, teacher logits included
    _save_scored(scored, FLAGS.out)
  if FLAGS.transfer_only:
    report.update({"transfer_set": {"train_examples": scored.train_examples,
                                    "augmented": examples.num_augmented,
                                    "total": len(examples)},
                   "times": {**times, "wall_s": time.time() - start}})
    paths.write_atomic(os.path.join(FLAGS.out, "results.json"),
                       json.dumps(report, indent=2, default=str))
    log(f"transfer set saved to {FLAGS.out}")
    return report
  dev_set = transfer.build(dev)
  skips = scored.skips

  vocab = WordVocabulary.build((side for ex in examples.words for side in ex), FLAGS.min_count)
  config = _student_config(len(vocab), task.num_labels, pair=len(task.text_columns) == 2)
  arrays = transfer.student_arrays(vocab, examples.words, FLAGS.max_length)
  if FLAGS.targets == "teacher":
    arrays["teacher_logits"] = examples.teacher_logits
  if FLAGS.targets == "labels" or FLAGS.label_weight > 0:
    arrays["labels"] = examples.labels
  dev_arrays = transfer.student_arrays(vocab, dev_set.words, FLAGS.max_length)
  dev_labels = [e.label for e in dev]

  def evaluate(tuner):
    logits = tuner.predict(dev_arrays, ("logits",))["logits"]
    scores = {**glue_eval.evaluate(task, logits, dev_labels), "examples": len(dev)}
    if teacher_dev_logits is not None:
      scores["teacher_agreement"] = float(
          (logits.argmax(-1) == teacher_dev_logits.argmax(-1)).mean())
    return {dev_split: scores}, logits

  objective = LogitRegression(label_weight=1.0 if FLAGS.targets == "labels"
                              else FLAGS.label_weight)
  finetune = loop.FinetuneConfig(
      learning_rate=FLAGS.learning_rate, warmup_fraction=FLAGS.warmup_fraction,
      batch_size=FLAGS.batch_size, num_epochs=FLAGS.num_epochs,
      weight_decay=FLAGS.weight_decay, eval_batch_size=FLAGS.eval_batch_size, seed=FLAGS.seed,
      log_every=FLAGS.log_every, on_nonfinite=FLAGS.on_nonfinite)
  per_epoch = loop.steps_per_epoch(len(examples), FLAGS.batch_size)
  steps = FLAGS.max_steps or max(1, round(FLAGS.num_epochs * per_epoch))
  began = time.time()
  student = student_checkpoint.Student(config, None, vocab, {})
  tuner = loop.Finetuner(student.module, objective, arrays, finetune, steps)
  with _training_dir() as directory:
    chosen = selection.fit(tuner, arrays, steps, evaluate, f"{dev_split}/{task.metrics[0]}",
                           directory, tensorboard=bool(FLAGS.out), desc="distill")
  times["train_s"] = time.time() - began
  student.params = jax.device_get(tuner.params)
  log(f"student best epoch {chosen.best}: {chosen.scores}")
  report.update({
      "transfer_set": {"train_examples": scored.train_examples,
                       "augmented": examples.num_augmented,
                       "total": len(examples)},
      "vocabulary": len(vocab), "config": dataclasses.asdict(config),
      "student_params": cli.count_params(student.params),
      "student_params_without_embeddings": (
          cli.count_params(student.params) - student_checkpoint.embedding_params(student)),
      "train_steps": steps, **chosen.report(), "eval": chosen.scores,
      "skipped": {"count": len(skips), "summary": skips.summary()},
      "times": {**times, "wall_s": time.time() - start},
      "command": "python -m bertjax.distill.student " + " ".join(sys.argv[1:])})
  if FLAGS.out:
    student.metadata = {"task": task.name, "targets": FLAGS.targets, "augment": FLAGS.augment,
                        "architecture": FLAGS.architecture,
                        "teacher": scored.teacher_dir, "max_length": FLAGS.max_length,
                        "eval": chosen.scores}
    student_checkpoint.save_student(FLAGS.out, student)
    paths.write_atomic(os.path.join(FLAGS.out, "results.json"),
                       json.dumps(report, indent=2, default=str))
    log(f"student saved to {FLAGS.out}")
  return report


def _training_dir():
  if FLAGS.out:
    return contextlib.nullcontext(FLAGS.out)
  return tempfile.TemporaryDirectory(prefix="bertjax_student_")


def main(argv: list[str]) -> dict:
  """`python -m bertjax.distill.student [flags]` (argv[0] is the program name)."""
  return cli.run_with_flags(FLAGS, run, __doc__, argv)


def command() -> None:
  """`bertjax distill` / `python -m bertjax.distill.student`."""
  cli.entry_point("bertjax.distill.student", main)


if __name__ == "__main__":
  command()
