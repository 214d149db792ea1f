r"""Distil a fine-tuned BERT classifier into Tang et al. (2019)'s BiLSTM, or train the
BiLSTM on the labels alone for comparison.

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

Training runs fine-tuning's machinery (bertjax.finetune.loop.Finetuner: the shared train
step and loop, AdamW, metric rows) with dev evaluation after every epoch and the best
epoch kept (bertjax.finetune.selection). OUT gets the transfer set with the teacher's logits
(transfer.jsonl), the student (params/, metadata.json, words.txt:
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
from absl import flags

from bertjax.data import augment
from bertjax.data.pos_lexicon import PosLexicon
from bertjax.data.word_vocabulary import WordVocabulary
from bertjax.distill import cli, student_checkpoint, transfer
from bertjax.distill.teacher import Teacher, read_run_config
from bertjax.evaluation import glue as glue_eval, readers
from bertjax.finetune import loop, selection
from bertjax.models.bilstm import POOLINGS, BiLSTMConfig
from bertjax.objectives.distill import LogitRegression
from bertjax.train import loop as train_loop

TARGETS = ("labels", "teacher")
TRANSFER_FILE = "transfer.jsonl"

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
_integer("max_length", 64, "Words per sentence (longer ones are truncated).")
_integer("min_count", 1, "Vocabulary: words seen at least this often in the transfer set.")
_integer("embedding_size", 300, "Word embedding size (the paper: 300).")
_integer("hidden_size", 150, "LSTM units per direction (the paper: 150).")
_integer("mlp_size", 200, "ReLU layer before the logits (the paper: 200).")
_enum("pooling", "max", list(POOLINGS), "Sentence vector: max over words or final states.")
_float("dropout_rate", 0.1, "Dropout before and after the ReLU layer.")
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
  if FLAGS.targets == "teacher" and not FLAGS.teacher:
    raise ValueError("--targets=teacher needs --teacher=OUTPUT_DIR (a fine-tuning run); or pass "
                     "--targets=labels.")
  if FLAGS.augment and FLAGS.targets != "teacher":
    raise ValueError("--augment needs --targets=teacher: augmented copies have no labels, the "
                     "teacher scores them.")
  if not FLAGS.task and not FLAGS.teacher:
    raise ValueError("Give --task (a GLUE classification task) or --teacher.")
  if not 0.0 <= FLAGS.label_weight <= 1.0:
    raise ValueError(f"--label_weight={FLAGS.label_weight}: must be in [0, 1].")


def _task(teacher_task: str | None) -> glue_eval.GlueTask:
  name = FLAGS.task or teacher_task
  if teacher_task and name != teacher_task:
    raise ValueError(f"--task={name} but --teacher={FLAGS.teacher} was fine-tuned on "
                     f"{teacher_task}.")
  task = glue_eval.get_task(name)
  if task.is_regression:
    raise ValueError(f"--task={name} is a regression task; the student classifies.")
  return task


def _augmenter(train) -> augment.Augmenter:
  config = augment.AugmentConfig(FLAGS.p_mask, FLAGS.p_pos, FLAGS.p_ngram, FLAGS.max_ngram,
                                 FLAGS.copies)
  corpus = [side for example in train for side in transfer.example_words(example)]
  return augment.Augmenter(config, PosLexicon.from_conll(data_dir=FLAGS.data_dir), corpus)


def run() -> dict:
  """Builds the transfer set, trains and selects the student; returns the report."""
  check_flags()
  start, times = time.time(), {}
  teacher_task = read_run_config(FLAGS.teacher)["task"] if FLAGS.teacher else None
  task = _task(teacher_task)
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
  report = {"task": task.name, "targets": FLAGS.targets, "augment": FLAGS.augment}
  dev_set = transfer.build(dev)
  teacher_dev_logits = None
  if FLAGS.teacher:
    began = time.time()
    teacher = Teacher.from_finetune_run(FLAGS.teacher, FLAGS.teacher_checkpoint)
    log(f"teacher: {teacher.description}")
    teacher_dev_logits = teacher.logits(dev_set.texts, FLAGS.teacher_batch_size)
    report["teacher"] = {"description": teacher.description,
                         "params": cli.count_params(teacher.params),
                         dev_split: glue_eval.evaluate(task, teacher_dev_logits,
                                                       [e.label for e in dev])}
    if FLAGS.targets == "teacher":
      examples = transfer.with_teacher(
          examples, teacher.logits(examples.texts, FLAGS.teacher_batch_size))
    times["teacher_s"] = time.time() - began
    log(f"teacher scored {len(examples) if FLAGS.targets == 'teacher' else 0} transfer and "
        f"{len(dev)} dev examples in {times['teacher_s']:.0f}s; teacher dev: "
        f"{report['teacher'][dev_split]}")
  if FLAGS.out:  # the transfer set as the student sees it, teacher logits included
    os.makedirs(FLAGS.out, exist_ok=True)
    transfer.save_jsonl(examples, os.path.join(FLAGS.out, TRANSFER_FILE))

  vocab = WordVocabulary.build((side for ex in examples.words for side in ex), FLAGS.min_count)
  config = BiLSTMConfig(len(vocab), task.num_labels, FLAGS.embedding_size, FLAGS.hidden_size,
                        FLAGS.mlp_size, FLAGS.pooling, pair=len(task.text_columns) == 2,
                        dropout_rate=FLAGS.dropout_rate)
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
                           directory, tensorboard=bool(FLAGS.out))
  times["train_s"] = time.time() - began
  student.params = jax.device_get(tuner.params)
  log(f"student best epoch {chosen.best}: {chosen.scores}")
  report.update({
      "transfer_set": {"train_examples": len(train), "augmented": examples.num_augmented,
                       "total": len(examples)},
      "vocabulary": len(vocab), "config": dataclasses.asdict(config),
      "student_params": cli.count_params(student.params),
      "student_params_without_embeddings": (
          cli.count_params(student.params) - student_checkpoint.embedding_params(student.params)),
      "train_steps": steps, **chosen.report(), "eval": chosen.scores,
      "skipped": {"count": len(skips), "summary": skips.summary()},
      "times": {**times, "wall_s": time.time() - start},
      "command": "python -m bertjax.distill.student " + " ".join(sys.argv[1:])})
  if FLAGS.out:
    student.metadata = {"task": task.name, "targets": FLAGS.targets, "augment": FLAGS.augment,
                        "teacher": FLAGS.teacher, "max_length": FLAGS.max_length,
                        "eval": chosen.scores}
    student_checkpoint.save_student(FLAGS.out, student)
    with open(os.path.join(FLAGS.out, "results.json"), "w") as f:
      json.dump(report, f, indent=2, default=str)
    log(f"student saved to {FLAGS.out}")
  return report


def _training_dir():
  if FLAGS.out:
    return contextlib.nullcontext(FLAGS.out)
  return tempfile.TemporaryDirectory(prefix="bertjax_student_")


def main(argv: list[str]) -> dict:
  """`python -m bertjax.distill.student [flags]` (argv[0] is the program name)."""
  return cli.run_with_flags(FLAGS, run, __doc__, argv)


if __name__ == "__main__":
  cli.entry_point("bertjax.distill.student", main)
