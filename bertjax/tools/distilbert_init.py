r"""DistilBERT's initialisation: a student taking one teacher layer out of two, saved with
the frozen teacher as the `init_checkpoint` of a StudentTeacher run.

  python -m bertjax.tools.distilbert_init --teacher=CKPT_DIR --out=INIT_DIR [--layers=0,2,4,7,9,11]
  python -m bertjax.tools.distilbert_init --teacher=CKPT_DIR --out=INIT_DIR --random_student

CKPT_DIR is a BERT model in any format `bertjax.open_model` opens (a `python -m
bertjax.convert` output, a Hugging Face folder, a bertjax.main model_dir); INIT_DIR is
what gin/runs/distilbert_pretrain.gin's `DISTILLATION_INIT` expects.

`--random_student` is the paper's ablation "random weights initialization": INIT_DIR then
holds the teacher alone, so the run draws its student at random (the trainer keeps its
own initialisation wherever the init checkpoint has no weights) and distils as usual.
"""
import dataclasses
from typing import Sequence

import jax
from absl import app, flags

from bertjax import output_paths
from bertjax.checkpoints import record
from bertjax.checkpoints.formats import open_model
from bertjax.checkpoints.params import PARAMS_ITEM, save_params
from bertjax.hf import registry
from bertjax.models import distilbert

STUDENT_ARCHITECTURE = "DistilBertForMaskedLM"  # the student of gin/models/distilbert_*.gin


def write_init_checkpoint(teacher_dir: str, out_dir: str, layers: Sequence[int] | None = None,
                          random_student: bool = False
                          ) -> tuple[distilbert.DistilBertConfig, list[int]]:
  """Writes {student, teacher} params for a StudentTeacher run's `init_checkpoint`
  ({teacher} alone with `random_student`; the returned layers are then [])."""
  teacher = open_model(teacher_dir)
  if teacher.family.name != "bert":
    raise ValueError(f"{teacher_dir} holds a {teacher.family.name!r} model; the DistilBERT "
                     "recipe distils a BERT teacher (BertForMaskedLM / BertForPreTraining).")
  params = jax.device_get(teacher.params)
  chosen = list(layers) if layers else distilbert.every_other_layer(teacher.config.num_layers)
  config = distilbert.student_config(teacher.config, len(chosen))
  pair = {"teacher": params}
  if random_student:
    chosen = []
  else:
    pair["student"] = distilbert.student_params_from_teacher(params, chosen)
  # Its model record: the student (DistilBertForMaskedLM), or the teacher when the run
  # draws its student.
  where = dict(tokenizer=None, weights=PARAMS_ITEM, source=str(teacher_dir))
  model_record = (record.of_model(teacher, subtree="teacher", **where) if random_student else
                  record.Record(registry.family_for_config(config).name, STUDENT_ARCHITECTURE,
                                config, dtype=config.dtype, subtree="student", **where))
  model_record.to_json()  # refused before anything is written
  save_params(out_dir, pair, {
      "family": "distilbert-init", "teacher": str(teacher_dir), "teacher_layers": chosen,
      "student_config": dataclasses.asdict(config),
      "teacher_config": dataclasses.asdict(teacher.config)})
  record.write(out_dir, model_record)
  return config, chosen


def main(argv):
  del argv
  flags_ = flags.FLAGS
  if not flags_.teacher or not flags_.out:
    raise app.UsageError("Give --teacher=DIR (a BERT checkpoint, HF folder or run) and --out=DIR.")
  layers = [int(i) for i in flags_.layers.split(",")] if flags_.layers else None
  if layers and flags_.random_student:
    raise app.UsageError("--layers picks the teacher layers a student starts from; a "
                         "--random_student starts from none: give one of the two.")
  out = output_paths.claim_folder(flags_.out, "--out", flags_.overwrite, reads=[flags_.teacher])
  config, chosen = write_init_checkpoint(flags_.teacher, out, layers, flags_.random_student)
  student = f"teacher layers {chosen}" if chosen else "to be drawn at random"
  print(f"Wrote a {config.num_layers}-layer student ({student}) and its teacher "
        f"to {flags_.out}; bind Trainer.init_checkpoint = {flags_.out!r}.")


if __name__ == "__main__":
  flags.DEFINE_string("teacher", None, "BERT teacher: any folder bertjax.open_model opens.")
  flags.DEFINE_string("out", None, "Where to write the student + teacher init checkpoint.")
  flags.DEFINE_string("layers", None, "Comma-separated teacher layers for the student "
                      "(default: one out of two, 0,2,4,...).")
  flags.DEFINE_bool("overwrite", False, "Replace an existing --out folder.")
  flags.DEFINE_bool("random_student", False, "Write the teacher alone: the run draws its "
                    "student at random (the paper's random-initialisation ablation).")
  app.run(main)
