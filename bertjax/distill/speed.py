r"""Teacher vs its students: parameters and inference speed, measured in one run.

  python -m bertjax.distill.speed --teacher=TEACHER_OUT --student=STUDENT_OUT \
      [--student=ANOTHER_STUDENT_OUT ...] [--split=dev --batch_size=64 --repeats=5] \
      [--out=speed.json]

All models (the teacher and each --student, a BiLSTM or a small Transformer) classify
the same sentences (a GLUE split of the teacher's task) in
batches of the same size, each through its own jitted forward pass, each on its own
inputs (the teacher's WordPiece ids up to its fine-tuning length, the student's word
ids). Batches are made once, before timing: rows sorted by length, padding trimmed to a
power of two (at least 32, as fine-tuning's prediction does), the last batch filled up
to the full size. A warm-up pass compiles every shape; then the models take turns for
`--repeats` timed passes each (so a busy shared CPU slows all alike) and the median
pass gives sentences/s. A student's speed-up is its sentences/s over the teacher's.
"""
import functools
import statistics
import time
from typing import Callable

import jax
import numpy as np
from absl import flags

from bertjax import batch as contract
from bertjax.distill import cli, student_checkpoint, transfer
from bertjax.distill.teacher import Teacher
from bertjax.evaluation import glue as glue_eval, readers
from bertjax.finetune import loop

FLAGS = flags.FlagValues()
_string = functools.partial(flags.DEFINE_string, flag_values=FLAGS)
_integer = functools.partial(flags.DEFINE_integer, flag_values=FLAGS)

_string("teacher", None, "OUTPUT_DIR of the teacher's `python -m bertjax.finetune.run`.")
_string("teacher_checkpoint", None, "The teacher's base encoder, if it moved since the run.")
flags.DEFINE_multi_string("student", [], "A `python -m bertjax.distill.student --out` folder "
                          "(repeat the flag for several students).", flag_values=FLAGS)
_string("split", "dev", "Which split of the teacher's task to classify.")
_string("data_dir", None, "Data folder; default bertjax.paths.data_dir().")
_integer("max_examples", 0, "Keep the first N sentences (0: all).")
_integer("batch_size", 64, "Sentences per batch, for both models.")
_integer("repeats", 5, "Timed passes per model (the median is reported).")
_string("out", None, "Also write the report here (JSON).")


def make_batches(arrays: dict[str, np.ndarray], batch_size: int) -> list[dict]:
  """Device batches of `batch_size` rows, sorted by length, padding trimmed."""
  order = np.argsort(loop.lengths(arrays), kind="stable")
  batches = []
  for start in range(0, len(order), batch_size):
    idx = order[start:start + batch_size]
    idx = np.concatenate([idx, np.repeat(idx[:1], batch_size - len(idx))])
    batches.append(jax.device_put(loop.trim_padding({k: v[idx] for k, v in arrays.items()})))
  return batches


def forward_fn(module, params, input_names: tuple[str, ...]) -> Callable:
  params = jax.device_put(params)
  apply = jax.jit(lambda p, b: module.apply({"params": p}, **contract.select(b, input_names),
                                            deterministic=True)["logits"])
  return lambda batch: apply(params, batch)


def timed_pass(forward: Callable, batches: list[dict]) -> float:
  began = time.perf_counter()
  outputs = [forward(b) for b in batches]
  jax.block_until_ready(outputs)
  return time.perf_counter() - began


def compare(models: dict[str, tuple[Callable, list[dict]]], sentences: int,
            repeats: int) -> dict[str, dict[str, float]]:
  """{name: {seconds, sentences_per_s}}: median of `repeats` passes, taken in turns."""
  for forward, batches in models.values():
    timed_pass(forward, batches)  # compiles each shape
  seconds = {name: [] for name in models}
  for _ in range(repeats):
    for name, (forward, batches) in models.items():
      seconds[name].append(timed_pass(forward, batches))
  return {name: {"seconds": statistics.median(s), "sentences_per_s":
                 sentences / statistics.median(s), "passes_s": s} for name, s in seconds.items()}


def run() -> dict:
  for name in ("teacher", "student"):
    if not FLAGS[name].value:
      raise ValueError(f"Give --{name}.")
  teacher = Teacher.from_finetune_run(FLAGS.teacher, FLAGS.teacher_checkpoint)
  students = [student_checkpoint.load_student(path) for path in FLAGS.student]
  for path, student in zip(FLAGS.student, students):
    if student.metadata.get("task") not in (None, teacher.task.name):
      raise ValueError(f"--student={path} was trained on {student.metadata['task']}, "
                       f"--teacher={FLAGS.teacher} on {teacher.task.name}.")
  examples = glue_eval.read_examples(teacher.task, FLAGS.split, readers.SkipLog(),
                                     FLAGS.data_dir, FLAGS.max_examples or None)
  sentences = transfer.build(examples)
  models = {"teacher": (forward_fn(teacher.module, teacher.params, contract.ENCODER_INPUTS),
                        make_batches(teacher.arrays(sentences.texts), FLAGS.batch_size))}
  for i, student in enumerate(students):
    arrays = transfer.student_arrays(student.vocab, sentences.words,
                                     student.metadata.get("max_length", 64))
    models[i] = (forward_fn(student.module, student.params, ("input_ids", "attention_mask")),
                 make_batches(arrays, FLAGS.batch_size))
  speeds = compare(models, len(examples), FLAGS.repeats)
  teacher_params = cli.count_params(teacher.params)
  report = {
      "task": teacher.task.name, "split": FLAGS.split, "sentences": len(examples),
      "batch_size": FLAGS.batch_size, "repeats": FLAGS.repeats,
      "devices": str(jax.devices()),
      "teacher": {"description": teacher.description, "params": teacher_params,
                  **speeds["teacher"]},
      "students": [],
  }
  for i, (path, student) in enumerate(zip(FLAGS.student, students)):
    params = cli.count_params(student.params)
    report["students"].append({
        "source": path, "family": student.family, "params": params,
        "params_without_embeddings": params - student_checkpoint.embedding_params(student),
        **speeds[i],
        "speedup": speeds[i]["sentences_per_s"] / speeds["teacher"]["sentences_per_s"],
        "params_ratio": teacher_params / params})
  return cli.emit(report, FLAGS.out)


def main(argv: list[str]) -> dict:
  """`python -m bertjax.distill.speed [flags]` (argv[0] is the program name)."""
  return cli.run_with_flags(FLAGS, run, __doc__, argv)


def command() -> None:
  """`bertjax distill-speed` / `python -m bertjax.distill.speed`."""
  cli.entry_point("bertjax.distill.speed", main)


if __name__ == "__main__":
  command()
