r"""DistilBERT (Sanh et al., 2019): a 6-layer BERT student distilled from a BERT teacher.

The student is BERT's architecture without token types and without the pooler, so
the modules are BertModel / MlmHead with those parts switched off. What makes it
DistilBERT is the training:
  * initialisation from the teacher, taking one layer out of two
    (`student_params_from_teacher`, or `python -m bertjax.models.distilbert`, which
    writes an `init_checkpoint` holding both the student and the frozen teacher);
  * the triple loss L_ce + L_mlm + L_cos (bertjax.objectives.distill), computed on a
    `distillation.StudentTeacher` pair.

  python -m bertjax.models.distilbert --teacher=CKPT_DIR --out=INIT_DIR [--layers=0,2,4,7,9,11]

CKPT_DIR is a BERT checkpoint from `python -m bertjax.convert --from_hf=...` (or a
Hugging Face BERT directory); INIT_DIR is what gin/runs/distilbert.gin's
`Trainer.init_checkpoint` expects.
"""
import dataclasses
import os
from typing import Any, Sequence

import flax.linen as nn
import jax
import numpy as np

from bertjax.models import bert


@dataclasses.dataclass(frozen=True)
class DistilBertConfig(bert.BertConfig):
  num_layers: int = 6
  type_vocab_size: int = 0  # no segment embeddings


def distilbert_base(**overrides) -> DistilBertConfig:
  return DistilBertConfig(**overrides)


def student_config(teacher: bert.BertConfig, num_layers: int | None = None) -> DistilBertConfig:
  """The student of `teacher`: same widths, half the layers (rounded up)."""
  fields = {f.name: getattr(teacher, f.name) for f in dataclasses.fields(bert.BertConfig)}
  fields.update(num_layers=num_layers or (teacher.num_layers + 1) // 2, type_vocab_size=0)
  return DistilBertConfig(**fields)


class DistilBertModel(bert.BertModel):
  """BertModel without token types or pooler (`pooler_output` is None)."""
  config: DistilBertConfig
  add_pooling_layer: bool = False


class DistilBertForMaskedLM(nn.Module):
  """DistilBERT with the tied MLM head: `logits`."""
  config: DistilBertConfig

  def setup(self):
    self.distilbert = DistilBertModel(self.config)
    self.mlm_head = bert.MlmHead(self.config)

  def __call__(self, input_ids, attention_mask=None, token_type_ids=None, position_ids=None,
               segment_ids=None, *, deterministic: bool = True,
               output_hidden_states: bool = False) -> dict:
    out = self.distilbert(input_ids, attention_mask, token_type_ids, position_ids, segment_ids,
                          deterministic=deterministic, output_hidden_states=output_hidden_states)
    out["logits"] = self.mlm_head(out["last_hidden_state"],
                                  self.distilbert.embeddings.word_embeddings)
    return out


def every_other_layer(num_teacher_layers: int) -> list[int]:
  """DistilBERT's "one layer out of two": 0, 2, 4, ..."""
  return list(range(0, num_teacher_layers, 2))


def student_params_from_teacher(teacher: Any, layers: Sequence[int] | None = None,
                                teacher_encoder: str = "bert") -> dict:
  """DistilBertForMaskedLM params from BertForMaskedLM / BertForPreTraining params.

  Embeddings and the MLM head are copied, encoder layers `layers` (default: one out
  of two) are taken from the teacher's stacked `layers` axis. The teacher's token-type
  row 0 is folded into the position table: every single-segment teacher input adds
  it, so the student's embedding output equals the teacher's on such inputs.
  """
  if teacher_encoder not in teacher or "mlm_head" not in teacher:
    raise ValueError(f"Teacher params need '{teacher_encoder}' and 'mlm_head' subtrees (a "
                     f"BertForMaskedLM / BertForPreTraining checkpoint); got {sorted(teacher)}.")
  encoder = teacher[teacher_encoder]
  stacked = encoder["encoder"]["layers"]
  num_teacher_layers = jax.tree_util.tree_leaves(stacked)[0].shape[0]
  layers = list(every_other_layer(num_teacher_layers) if layers is None else layers)
  if not layers or min(layers) < 0 or max(layers) >= num_teacher_layers:
    raise ValueError(f"Student layers {layers} must be indices into the teacher's "
                     f"{num_teacher_layers} layers.")
  index = np.asarray(layers)
  embeddings = {k: v for k, v in encoder["embeddings"].items() if k != "token_type_embeddings"}
  if "token_type_embeddings" in encoder["embeddings"]:
    type0 = np.asarray(encoder["embeddings"]["token_type_embeddings"]["embedding"])[0]
    positions = np.asarray(embeddings["position_embeddings"]["embedding"])
    embeddings["position_embeddings"] = {"embedding": positions + type0}
  return {
      "distilbert": {"embeddings": embeddings,
                     "encoder": {"layers": jax.tree.map(lambda x: np.asarray(x)[index], stacked)}},
      "mlm_head": teacher["mlm_head"],
  }


def write_init_checkpoint(teacher_dir: str, out_dir: str,
                          layers: Sequence[int] | None = None) -> tuple[DistilBertConfig, list[int]]:
  """Writes {student, teacher} params for a StudentTeacher run's `init_checkpoint`."""
  from bertjax import checkpoints  # Local: orbax is only needed for this entry point.
  from bertjax.hf import checkpoint as hf_checkpoint, model as hf_model

  if os.path.isfile(os.path.join(teacher_dir, "config.json")):
    teacher = hf_model.from_hf(teacher_dir)
  else:
    teacher = hf_checkpoint.load(teacher_dir)
  if teacher.family.name != "bert":
    raise ValueError(f"{teacher_dir} holds a {teacher.family.name!r} model; the DistilBERT "
                     "recipe distils a BERT teacher (BertForMaskedLM / BertForPreTraining).")
  params = jax.device_get(teacher.params)
  chosen = list(layers) if layers else every_other_layer(teacher.config.num_layers)
  student = student_params_from_teacher(params, chosen)
  config = student_config(teacher.config, len(chosen))
  checkpoints.save_params(out_dir, {"student": student, "teacher": params}, {
      "family": "distilbert-init", "teacher": str(teacher_dir), "teacher_layers": chosen,
      "student_config": dataclasses.asdict(config),
      "teacher_config": dataclasses.asdict(teacher.config)})
  return config, chosen


def main(argv):
  from absl import app, flags
  del argv
  flags_ = flags.FLAGS
  if not flags_.teacher or not flags_.out:
    raise app.UsageError("Give --teacher=DIR (BERT checkpoint or HF dir) and --out=DIR.")
  layers = [int(i) for i in flags_.layers.split(",")] if flags_.layers else None
  config, chosen = write_init_checkpoint(flags_.teacher, flags_.out, layers)
  print(f"Wrote a {config.num_layers}-layer student (teacher layers {chosen}) and its teacher "
        f"to {flags_.out}; bind Trainer.init_checkpoint = {flags_.out!r}.")


if __name__ == "__main__":
  from absl import app, flags
  flags.DEFINE_string("teacher", None, "BERT teacher: bertjax checkpoint or HF directory.")
  flags.DEFINE_string("out", None, "Where to write the student + teacher init checkpoint.")
  flags.DEFINE_string("layers", None, "Comma-separated teacher layers for the student "
                      "(default: one out of two, 0,2,4,...).")
  app.run(main)
