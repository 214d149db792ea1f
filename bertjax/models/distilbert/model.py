r"""DistilBERT (Sanh et al., 2019): a 6-layer BERT student distilled from a BERT teacher.

The student is BERT's architecture without token types and without the pooler, so
the modules are BertModel / MlmHead with those parts switched off. What makes it
DistilBERT is the training:
  * initialisation from the teacher, taking one layer out of two
    (`student_params_from_teacher`; `python -m bertjax.tools.distilbert_init` writes an
    `init_checkpoint` holding both the student and the frozen teacher);
  * the triple loss L_ce + L_mlm + L_cos (bertjax.objectives.distill), computed on a
    `models.common.distillation.StudentTeacher` pair.
"""
import dataclasses
from typing import Any, Sequence

import flax.linen as nn
import jax
import numpy as np

from bertjax.models import bert


@dataclasses.dataclass(frozen=True)
class DistilBertConfig(bert.BertConfig):
  num_layers: int = 6
  type_vocab_size: int = 0  # no segment embeddings
  # Task heads' dropouts (transformers' seq_classif_dropout / qa_dropout).
  seq_classif_dropout: float = 0.2
  qa_dropout: float = 0.1


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
