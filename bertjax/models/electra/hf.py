"""ELECTRA <-> transformers' ElectraModel / ElectraForPreTraining / ElectraForMaskedLM and
the task classes ElectraFor{SequenceClassification, TokenClassification,
QuestionAnswering, MultipleChoice}.

The joint pretraining model has no HF counterpart; bertjax.checkpoints.run_model's
`export_discriminator` / `export_generator` cut it into the single networks HF ships
(the discriminator is what fine-tuning starts from).
"""
from typing import Any, Mapping

from bertjax.models.bert.hf import encoder_rules
from bertjax.hf import tasks
from bertjax.hf.family import Family, config_fields
from bertjax.hf.mapping import Rule
from bertjax.models import electra
from bertjax.models.electra import tasks as electra_tasks

_RENAMED = {
    "num_hidden_layers": "num_layers",
    "num_attention_heads": "num_heads",
    "hidden_dropout_prob": "hidden_dropout",
    "attention_probs_dropout_prob": "attention_dropout",
}

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


def model_rules(hf: str, ours: str, config: electra.ElectraConfig) -> list[Rule]:
  rules = encoder_rules(hf, ours)
  if config.embedding_size != config.hidden_size:
    rules += [Rule(f"{hf}embeddings_project.weight", f"{ours}embeddings_project/kernel", "linear"),
              Rule(f"{hf}embeddings_project.bias", f"{ours}embeddings_project/bias")]
  return rules


class ElectraFamily(Family):
  name = "electra"
  config_class = electra.ElectraConfig
  model_types = ("electra",)
  architectures = {
      "ElectraModel": ("last_hidden_state",),
      "ElectraForPreTraining": ("logits",),
      "ElectraForMaskedLM": ("logits",),
      **tasks.architectures("Electra", electra_tasks.KINDS),
  }
  # Buffers, and the generator's output matrix (tied to the word embeddings).
  ignored_keys = (r".*position_ids", r".*embeddings\.token_type_ids", r"generator_lm_head\.weight")

  def config_from_hf(self, hf_config: Mapping[str, Any]) -> electra.ElectraConfig:
    position_type = hf_config.get("position_embedding_type", "absolute")
    if position_type != "absolute":
      raise ValueError(f"position_embedding_type={position_type!r} is not supported for ELECTRA; "
                       "only 'absolute' is.")
    if not hf_config.get("tie_word_embeddings", True):
      raise ValueError("tie_word_embeddings=False is not supported for ELECTRA: the generator's "
                       "output layer is the word-embedding matrix.")
    _check_summary(hf_config)
    values = {_RENAMED.get(k, k): v for k, v in hf_config.items()}
    values.setdefault("embedding_size", values.get("hidden_size", 256))
    values["summary_activation"] = hf_config.get("summary_activation") or "linear"
    values.update(tasks.label_values(hf_config))
    return electra.ElectraConfig(**config_fields(electra.ElectraConfig, values))

  def config_to_hf(self, config: electra.ElectraConfig, architecture: str) -> dict:
    return {
        "model_type": "electra", "architectures": [architecture],
        "vocab_size": config.vocab_size, "embedding_size": config.embedding_size,
        "hidden_size": config.hidden_size, "num_hidden_layers": config.num_layers,
        "num_attention_heads": config.num_heads, "intermediate_size": config.intermediate_size,
        "hidden_act": config.hidden_act, "hidden_dropout_prob": config.hidden_dropout,
        "attention_probs_dropout_prob": config.attention_dropout,
        "max_position_embeddings": config.max_position_embeddings,
        "type_vocab_size": config.type_vocab_size, "layer_norm_eps": config.layer_norm_eps,
        "initializer_range": config.initializer_range, "pad_token_id": config.pad_token_id,
        "position_embedding_type": "absolute", "tie_word_embeddings": True,
        "classifier_dropout": config.classifier_dropout, "summary_type": config.summary_type,
        "summary_use_proj": True, "summary_activation": config.summary_activation,
        "summary_last_dropout": config.summary_last_dropout, **tasks.label_config(config),
    }

  def make_module(self, architecture: str, config: electra.ElectraConfig):
    kind = tasks.kind_of(architecture)
    if kind:
      return electra_tasks.task_model(kind, config)
    return _MODULES[architecture](config)

  def rules(self, architecture: str, config: electra.ElectraConfig) -> list[Rule]:
    kind = tasks.kind_of(architecture)
    if kind:
      return model_rules("electra.", "encoder/", config) + tasks.head_rules(*TASK_HEADS[kind])
    if architecture == "ElectraModel":
      return model_rules("", "", config)
    rules = model_rules("electra.", "electra/", config)
    if architecture == "ElectraForPreTraining":
      return rules + [
          Rule("discriminator_predictions.dense.weight", "discriminator_head/dense/kernel", "linear"),
          Rule("discriminator_predictions.dense.bias", "discriminator_head/dense/bias"),
          Rule("discriminator_predictions.dense_prediction.weight",
               "discriminator_head/prediction/kernel", "linear"),
          Rule("discriminator_predictions.dense_prediction.bias",
               "discriminator_head/prediction/bias")]
    return rules + [
        Rule("generator_predictions.dense.weight", "generator_head/transform/kernel", "linear"),
        Rule("generator_predictions.dense.bias", "generator_head/transform/bias"),
        Rule("generator_predictions.LayerNorm.weight", "generator_head/transform_norm/scale"),
        Rule("generator_predictions.LayerNorm.bias", "generator_head/transform_norm/bias"),
        Rule("generator_lm_head.bias", "generator_head/bias")]


def _check_summary(hf_config: Mapping[str, Any]) -> None:
  """ElectraForMultipleChoice's sequence summary: the options transformers' own uses."""
  summary_type = hf_config.get("summary_type", "first")
  if summary_type not in electra_tasks.SUMMARY_TYPES:
    raise ValueError(f"ELECTRA summary_type={summary_type!r} is not supported; use one of "
                     f"{sorted(electra_tasks.SUMMARY_TYPES)}.")
  for key, supported in (("summary_use_proj", True), ("summary_proj_to_labels", False),
                         ("summary_first_dropout", 0)):
    if hf_config.get(key, supported) != supported:
      raise ValueError(f"ELECTRA {key}={hf_config[key]!r} is not supported (only {supported!r}).")
