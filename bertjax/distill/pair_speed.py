r"""Two fine-tuned classifiers side by side: parameters and inference speed (a BERT teacher
vs its distilled, half-depth DistilBERT student, as in Sanh et al.'s Table 3).

  python -m bertjax.distill.pair_speed --teacher=TEACHER_RUN --student=STUDENT_RUN \
      [--split=dev --batch_size=32 --max_examples=512 --repeats=5] [--out=speed.json]

Both folders are OUTPUT_DIRs of `python -m bertjax.finetune.run` on the same GLUE task,
each reopened whole (base encoder + head, best epoch) as `bertjax.distill.teacher` does.
Both classify the same sentences, each tokenized by its own run's tokenizer, in the same
batches (`bertjax.distill.speed.make_batches`: sorted by length, padding trimmed), timed
in turns after a compiling pass, the median of `--repeats` passes each
(`bertjax.distill.speed.compare`). Parameters are counted with and without the
embeddings, whose share is large in small models: the paper's "40% fewer parameters" is
BERT-base's 110M vs DistilBERT's 66M, embeddings included.
"""
import functools

import jax
from absl import flags

from bertjax import batch as contract
from bertjax.distill import cli, speed
from bertjax.distill.teacher import Teacher
from bertjax.evaluation import glue as glue_eval, readers

FLAGS = flags.FlagValues()
_string = functools.partial(flags.DEFINE_string, flag_values=FLAGS)
_integer = functools.partial(flags.DEFINE_integer, flag_values=FLAGS)

_string("teacher", None, "OUTPUT_DIR of the teacher's `python -m bertjax.finetune.run`.")
_string("student", None, "OUTPUT_DIR of the student's, on the same task.")
_string("split", "dev", "Which split of the task to classify.")
_string("data_dir", None, "Data folder; default bertjax.paths.data_dir().")
_integer("max_examples", 512, "Keep the first N sentences (0: all).")
_integer("batch_size", 32, "Sentences per batch, for both models.")
_integer("repeats", 5, "Timed passes per model (the median is reported).")
_string("out", None, "Also write the report here (JSON).")


def parameter_counts(params) -> dict[str, int]:
  """All of a classifier's parameters, and those outside its encoder's embeddings."""
  total = cli.count_params(params)
  embeddings = cli.count_params(params.get("encoder", {}).get("embeddings", {}))
  return {"params": total, "params_without_embeddings": total - embeddings}


def run() -> dict:
  for name in ("teacher", "student"):
    if not FLAGS[name].value:
      raise ValueError(f"Give --{name}=OUTPUT_DIR of a `python -m bertjax.finetune.run`.")
  models = {name: Teacher.from_finetune_run(FLAGS[name].value) for name in ("teacher", "student")}
  task = models["teacher"].task
  if models["student"].task.name != task.name:
    raise ValueError(f"--student={FLAGS.student} was fine-tuned on "
                     f"{models['student'].task.name}, --teacher={FLAGS.teacher} on {task.name}; "
                     "compare two runs on the same task.")
  examples = glue_eval.read_examples(task, FLAGS.split, readers.SkipLog(), FLAGS.data_dir,
                                     FLAGS.max_examples or None)
  texts = [(e.text_a,) if e.text_b is None else (e.text_a, e.text_b) for e in examples]
  timed = {name: (speed.forward_fn(m.module, m.params, contract.ENCODER_INPUTS),
                  speed.make_batches(m.arrays(texts), FLAGS.batch_size))
           for name, m in models.items()}
  speeds = speed.compare(timed, len(examples), FLAGS.repeats)
  report = {"task": task.name, "split": FLAGS.split, "sentences": len(examples),
            "batch_size": FLAGS.batch_size, "repeats": FLAGS.repeats,
            "devices": str(jax.devices())}
  for name, model in models.items():
    report[name] = {"description": model.description, "layers": model.encoder.config.num_layers,
                    **parameter_counts(model.params), **speeds[name]}
  report["speedup"] = report["student"]["sentences_per_s"] / report["teacher"]["sentences_per_s"]
  report["params_ratio"] = report["student"]["params"] / report["teacher"]["params"]
  report["params_ratio_without_embeddings"] = (report["student"]["params_without_embeddings"]
                                               / report["teacher"]["params_without_embeddings"])
  return cli.emit(report, FLAGS.out)


def main(argv: list[str]) -> dict:
  """`python -m bertjax.distill.pair_speed [flags]` (argv[0] is the program name)."""
  return cli.run_with_flags(FLAGS, run, __doc__, argv)


if __name__ == "__main__":
  cli.entry_point("bertjax.distill.pair_speed", main)
