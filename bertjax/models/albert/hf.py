"""ALBERT <-> transformers' AlbertModel / AlbertForPreTraining / AlbertForMaskedLM and the
task classes AlbertFor{SequenceClassification, TokenClassification, QuestionAnswering,
MultipleChoice}.

The reference stores layers as `albert_layer_groups.{g}.albert_layers.{i}`: with one
group (full sharing) that is one layer whose tensors map to our broadcast (unstacked)
layer parameters; with one group per layer they stack on our `layers` axis.
"""
from bertjax.hf import tasks
from bertjax.hf.config_map import ConfigMap, Field, same
from bertjax.hf.family import Family
from bertjax.hf.mapping import LAYER, Rule, layer_norm, linear, qkv_projections
from bertjax.models import albert
from bertjax.models.albert import tasks as albert_tasks
from bertjax.models.bert.hf import ENCODER_FIELDS, embedding_rules, lm_transform_rules

CONFIG_MAP = ConfigMap(
    "ALBERT",
    ENCODER_FIELDS + same("embedding_size", "num_hidden_groups")
    + (Field("classifier_dropout_prob", "classifier_dropout"),),
    constants={"inner_group_num": 1, "position_embedding_type": "absolute"},
    hf_only={"tie_word_embeddings": True},
    reasons={"inner_group_num": "every released checkpoint has one layer per group"})

# Task kind -> the transformers layers of its head: (hidden dense or None, output layer).
TASK_HEADS = {
    "ForSequenceClassification": (None, "classifier"),
    "ForTokenClassification": (None, "classifier"),
    "ForQuestionAnswering": (None, "qa_outputs"),
    "ForMultipleChoice": (None, "classifier"),
}


def encoder_rules(hf: str, ours: str, config: albert.AlbertConfig) -> list[Rule]:
  group = "0" if config.share_parameters else LAYER
  layer = f"{hf}encoder.albert_layer_groups.{group}.albert_layers.0."
  stack = f"{ours}encoder/layers/"
  return [
      *embedding_rules(f"{hf}embeddings.", f"{ours}embeddings/",
                       ("word_embeddings", "position_embeddings", "token_type_embeddings")),
      *linear(f"{hf}encoder.embedding_hidden_mapping_in", f"{ours}embedding_projection"),
      *qkv_projections(f"{layer}attention.", f"{stack}attention/"),
      *linear(f"{layer}attention.dense", f"{stack}attention/out", in_dims=2),
      *layer_norm(f"{layer}attention.LayerNorm", f"{stack}attention_norm"),
      *linear(f"{layer}ffn", f"{stack}mlp/intermediate"),
      *linear(f"{layer}ffn_output", f"{stack}mlp/output"),
      *layer_norm(f"{layer}full_layer_layer_norm", f"{stack}mlp_norm"),
  ]


def mlm_head_rules() -> list[Rule]:
  return lm_transform_rules("predictions.dense", "predictions.LayerNorm", "predictions.bias",
                            "predictions/")


class AlbertFamily(Family):
  name = "albert"
  config_class = albert.AlbertConfig
  config_map = CONFIG_MAP
  model_types = ("albert",)
  architectures = {
      "AlbertModel": ("last_hidden_state", "pooler_output"),
      "AlbertForPreTraining": ("prediction_logits", "sop_logits"),
      "AlbertForMaskedLM": ("logits",),
      **tasks.architectures("Albert", albert_tasks.KINDS),
  }
  ignored_keys = (r".*position_ids", r".*token_type_ids", r"predictions\.decoder\.(weight|bias)")
  task_encoder_prefix = "albert."
  task_heads = TASK_HEADS
  pooled_kinds = albert_tasks.POOLED
  pooler_layer = "pooler"  # a bare Linear (BERT's is `pooler.dense`)
  modules = {"AlbertModel": albert.AlbertModel, "AlbertForPreTraining": albert.AlbertForPreTraining,
             "AlbertForMaskedLM": albert.AlbertForMaskedLM}
  task_models = albert_tasks

  def encoder_rules(self, hf: str, ours: str, config: albert.AlbertConfig) -> list[Rule]:
    return encoder_rules(hf, ours, config)

  def model_rules(self, architecture: str, config: albert.AlbertConfig) -> list[Rule]:
    if architecture == "AlbertModel":
      return encoder_rules("", "", config) + self.pooler_rules("", "")
    rules = encoder_rules("albert.", "albert/", config) + mlm_head_rules()
    if architecture == "AlbertForPreTraining":
      rules += (self.pooler_rules("albert.", "albert/")
                + linear("sop_classifier.classifier", "sop_classifier"))
    return rules
