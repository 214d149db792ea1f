"""ALBERT <-> transformers' AlbertModel / AlbertForPreTraining / AlbertForMaskedLM and the
task classes AlbertFor{SequenceClassification, TokenClassification, QuestionAnswering,
MultipleChoice}.

The reference stores layers as `albert_layer_groups.{g}.albert_layers.{i}`: with one
group (full sharing) that is one layer whose tensors map to our broadcast (unstacked)
layer parameters; with one group per layer they stack on our `layers` axis.
"""
from typing import Any, Mapping

from bertjax.hf import tasks
from bertjax.hf.family import Family, config_fields
from bertjax.hf.mapping import LAYER, Rule
from bertjax.models import albert
from bertjax.models.albert import tasks as albert_tasks

_RENAMED = {
    "num_hidden_layers": "num_layers",
    "num_attention_heads": "num_heads",
    "hidden_dropout_prob": "hidden_dropout",
    "attention_probs_dropout_prob": "attention_dropout",
    "classifier_dropout_prob": "classifier_dropout",
}

# Task kind -> the transformers layers of its head: (hidden dense or None, output layer).
TASK_HEADS = {
    "ForSequenceClassification": (None, "classifier"),
    "ForTokenClassification": (None, "classifier"),
    "ForQuestionAnswering": (None, "qa_outputs"),
    "ForMultipleChoice": (None, "classifier"),
}


def encoder_rules(config: albert.AlbertConfig, hf: str, ours: str) -> list[Rule]:
  group = "0" if config.share_parameters else LAYER
  layer = f"{hf}encoder.albert_layer_groups.{group}.albert_layers.0."
  stack = f"{ours}encoder/layers/"
  rules = [Rule(f"{hf}embeddings.{name}.weight", f"{ours}embeddings/{name}/embedding")
           for name in ("word_embeddings", "position_embeddings", "token_type_embeddings")]
  rules += [
      Rule(f"{hf}embeddings.LayerNorm.weight", f"{ours}embeddings/layer_norm/scale"),
      Rule(f"{hf}embeddings.LayerNorm.bias", f"{ours}embeddings/layer_norm/bias"),
      Rule(f"{hf}encoder.embedding_hidden_mapping_in.weight", f"{ours}embedding_projection/kernel",
           "linear"),
      Rule(f"{hf}encoder.embedding_hidden_mapping_in.bias", f"{ours}embedding_projection/bias"),
  ]
  for name in ("query", "key", "value"):
    rules += [Rule(f"{layer}attention.{name}.weight", f"{stack}attention/{name}/kernel", "linear"),
              Rule(f"{layer}attention.{name}.bias", f"{stack}attention/{name}/bias", "bias")]
  return rules + [
      Rule(f"{layer}attention.dense.weight", f"{stack}attention/out/kernel", "linear", 2),
      Rule(f"{layer}attention.dense.bias", f"{stack}attention/out/bias"),
      Rule(f"{layer}attention.LayerNorm.weight", f"{stack}attention_norm/scale"),
      Rule(f"{layer}attention.LayerNorm.bias", f"{stack}attention_norm/bias"),
      Rule(f"{layer}ffn.weight", f"{stack}mlp/intermediate/kernel", "linear"),
      Rule(f"{layer}ffn.bias", f"{stack}mlp/intermediate/bias"),
      Rule(f"{layer}ffn_output.weight", f"{stack}mlp/output/kernel", "linear"),
      Rule(f"{layer}ffn_output.bias", f"{stack}mlp/output/bias"),
      Rule(f"{layer}full_layer_layer_norm.weight", f"{stack}mlp_norm/scale"),
      Rule(f"{layer}full_layer_layer_norm.bias", f"{stack}mlp_norm/bias"),
  ]


def pooler_rules(hf: str, ours: str) -> list[Rule]:
  return [Rule(f"{hf}pooler.weight", f"{ours}pooler/kernel", "linear"),
          Rule(f"{hf}pooler.bias", f"{ours}pooler/bias")]


def mlm_head_rules() -> list[Rule]:
  return [Rule("predictions.dense.weight", "predictions/transform/kernel", "linear"),
          Rule("predictions.dense.bias", "predictions/transform/bias"),
          Rule("predictions.LayerNorm.weight", "predictions/transform_norm/scale"),
          Rule("predictions.LayerNorm.bias", "predictions/transform_norm/bias"),
          Rule("predictions.bias", "predictions/bias")]


class AlbertFamily(Family):
  name = "albert"
  config_class = albert.AlbertConfig
  model_types = ("albert",)
  architectures = {
      "AlbertModel": ("last_hidden_state", "pooler_output"),
      "AlbertForPreTraining": ("prediction_logits", "sop_logits"),
      "AlbertForMaskedLM": ("logits",),
      **tasks.architectures("Albert", albert_tasks.KINDS),
  }
  ignored_keys = (r".*position_ids", r".*token_type_ids", r"predictions\.decoder\.(weight|bias)")

  def config_from_hf(self, hf_config: Mapping[str, Any]) -> albert.AlbertConfig:
    if hf_config.get("inner_group_num", 1) != 1:
      raise ValueError(f"inner_group_num={hf_config['inner_group_num']} is not supported for "
                       "ALBERT; only 1 (every released checkpoint) is.")
    position_type = hf_config.get("position_embedding_type", "absolute")
    if position_type != "absolute":
      raise ValueError(f"position_embedding_type={position_type!r} is not supported for ALBERT; "
                       "only 'absolute' is.")
    values = {_RENAMED.get(k, k): v for k, v in hf_config.items()}
    values.update(tasks.label_values(hf_config))
    return albert.AlbertConfig(**config_fields(albert.AlbertConfig, values))

  def config_to_hf(self, config: albert.AlbertConfig, architecture: str) -> dict:
    return {
        "model_type": "albert", "architectures": [architecture],
        "vocab_size": config.vocab_size, "embedding_size": config.embedding_size,
        "hidden_size": config.hidden_size, "num_hidden_layers": config.num_layers,
        "num_hidden_groups": config.num_hidden_groups, "inner_group_num": 1,
        "num_attention_heads": config.num_heads, "intermediate_size": config.intermediate_size,
        "hidden_act": config.hidden_act, "hidden_dropout_prob": config.hidden_dropout,
        "attention_probs_dropout_prob": config.attention_dropout,
        "classifier_dropout_prob": config.classifier_dropout,
        "max_position_embeddings": config.max_position_embeddings,
        "type_vocab_size": config.type_vocab_size, "layer_norm_eps": config.layer_norm_eps,
        "initializer_range": config.initializer_range, "pad_token_id": config.pad_token_id,
        "position_embedding_type": "absolute", "tie_word_embeddings": True,
        **tasks.label_config(config),
    }

  def make_module(self, architecture: str, config: albert.AlbertConfig):
    kind = tasks.kind_of(architecture)
    if kind:
      return albert_tasks.task_model(kind, config)
    return {"AlbertModel": albert.AlbertModel, "AlbertForPreTraining": albert.AlbertForPreTraining,
            "AlbertForMaskedLM": albert.AlbertForMaskedLM}[architecture](config)

  def rules(self, architecture: str, config: albert.AlbertConfig) -> list[Rule]:
    kind = tasks.kind_of(architecture)
    if kind:
      pooler = pooler_rules("albert.", "encoder/") if kind in albert_tasks.POOLED else []
      return (encoder_rules(config, "albert.", "encoder/") + pooler
              + tasks.head_rules(*TASK_HEADS[kind]))
    if architecture == "AlbertModel":
      return encoder_rules(config, "", "") + pooler_rules("", "")
    rules = encoder_rules(config, "albert.", "albert/") + mlm_head_rules()
    if architecture == "AlbertForPreTraining":
      rules += pooler_rules("albert.", "albert/") + [
          Rule("sop_classifier.classifier.weight", "sop_classifier/kernel", "linear"),
          Rule("sop_classifier.classifier.bias", "sop_classifier/bias")]
    return rules
