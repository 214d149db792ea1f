"""ELECTRA <-> transformers' ElectraModel / ElectraForPreTraining / ElectraForMaskedLM and
the task classes ElectraFor{SequenceClassification, TokenClassification,
QuestionAnswering, MultipleChoice}.

The joint pretraining model has no HF counterpart; bertjax.checkpoints.run_model's
`export_discriminator` / `export_generator` cut it into the single networks HF ships
(the discriminator is what fine-tuning starts from).
"""
from typing import Any, Mapping

from bertjax.models.bert import hf as bert_hf
from bertjax.models.bert.hf import ENCODER_FIELDS
from bertjax.hf import tasks
from bertjax.hf.config_map import ConfigMap, Field, same
from bertjax.hf.family import Family
from bertjax.hf.mapping import Rule, linear
from bertjax.models import electra
from bertjax.models.electra import tasks as electra_tasks

# summary_*: ElectraForMultipleChoice's sequence summary, with the options transformers' own
# uses (a config.json without summary_activation, or with null, has none: 'linear').
CONFIG_MAP = ConfigMap(
    "ELECTRA",
    ENCODER_FIELDS + same("embedding_size", "classifier_dropout", "summary_type")
    + (Field("summary_activation", "summary_activation", from_hf=lambda value: value or "linear",
             default="linear"),
       Field("summary_last_dropout", "summary_last_dropout")),
    constants={"position_embedding_type": "absolute", "tie_word_embeddings": True,
               "summary_use_proj": True},
    checked={"summary_proj_to_labels": False, "summary_first_dropout": 0},
    reasons={"tie_word_embeddings": "the generator's output layer is the word-embedding matrix"})

# Task kind -> the transformers layers of its head: (hidden dense or None, output layer).
TASK_HEADS = {
    "ForSequenceClassification": ("classifier.dense", "classifier.out_proj"),
    "ForTokenClassification": (None, "classifier"),
    "ForQuestionAnswering": (None, "qa_outputs"),
    "ForMultipleChoice": ("sequence_summary.summary", "classifier"),
}

_MODULES = {
    "ElectraModel": electra.ElectraModel,
    "ElectraForPreTraining": electra.ElectraForPreTraining,
    "ElectraForMaskedLM": electra.ElectraForMaskedLM,
}


def encoder_rules(hf: str, ours: str, config: electra.ElectraConfig) -> list[Rule]:
  rules = bert_hf.encoder_rules(hf, ours)
  if config.embedding_size != config.hidden_size:
    rules += linear(f"{hf}embeddings_project", f"{ours}embeddings_project")
  return rules


class ElectraFamily(Family):
  name = "electra"
  config_class = electra.ElectraConfig
  config_map = CONFIG_MAP
  model_types = ("electra",)
  architectures = {
      "ElectraModel": ("last_hidden_state",),
      "ElectraForPreTraining": ("logits",),
      "ElectraForMaskedLM": ("logits",),
      **tasks.architectures("Electra", electra_tasks.KINDS),
  }
  # Buffers, and the generator's output matrix (tied to the word embeddings).
  ignored_keys = (r".*position_ids", r".*embeddings\.token_type_ids", r"generator_lm_head\.weight")
  task_encoder_prefix = "electra."
  task_heads = TASK_HEADS
  modules = _MODULES
  task_models = electra_tasks

  # summary_type is one of our poolings; without embedding_size, the embeddings are as wide
  # as the hidden states (no projection).
  def config_from_hf(self, hf_config: Mapping[str, Any]) -> electra.ElectraConfig:
    summary_type = hf_config.get("summary_type", "first")
    if summary_type not in electra_tasks.SUMMARY_TYPES:
      raise ValueError(f"ELECTRA summary_type={summary_type!r} is not supported; use one of "
                       f"{sorted(electra_tasks.SUMMARY_TYPES)}.")
    values = self.config_map.read(hf_config)
    values.setdefault("embedding_size", values.get("hidden_size", 256))
    return electra.ElectraConfig(**values)

  def encoder_rules(self, hf: str, ours: str, config: electra.ElectraConfig) -> list[Rule]:
    return encoder_rules(hf, ours, config)

  def model_rules(self, architecture: str, config: electra.ElectraConfig) -> list[Rule]:
    if architecture == "ElectraModel":
      return encoder_rules("", "", config)
    rules = encoder_rules("electra.", "electra/", config)
    if architecture == "ElectraForPreTraining":
      return (rules + linear("discriminator_predictions.dense", "discriminator_head/dense")
              + linear("discriminator_predictions.dense_prediction",
                       "discriminator_head/prediction"))
    return rules + bert_hf.lm_transform_rules("generator_predictions.dense",
                                              "generator_predictions.LayerNorm",
                                              "generator_lm_head.bias", "generator_head/")

