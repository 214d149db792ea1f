"""BigBird <-> transformers' BigBirdModel / BigBirdForMaskedLM / BigBirdForPreTraining and
the task classes BigBirdFor{SequenceClassification, TokenClassification, QuestionAnswering,
MultipleChoice} (models/bigbird/tasks.py).

BigBird's tensors are BERT's (`bert.` prefix, `cls.` heads), so the adapter extends the
BERT one; what it adds is the attention config. transformers draws the random blocks with
numpy seeded by the layer index in training mode and points them all at block 0 in eval
mode: `BigBird(random_seed=0, eval_plan='zeros')` reproduces both.
"""
from typing import Any, Mapping

from bertjax.models.bert.hf import BertFamily, ENCODER_FIELDS
from bertjax.hf import tasks
from bertjax.hf.config_map import ConfigMap, same
from bertjax.hf.mapping import Rule, layer_norm, linear
from bertjax.layers.long_attention import sparse
from bertjax.models import bigbird
from bertjax.models.bigbird import tasks as bigbird_tasks

# Task kind -> the transformers layers of its head: (hidden dense or None, output layer).
TASK_HEADS = {
    "ForSequenceClassification": ("classifier.dense", "classifier.out_proj"),
    "ForTokenClassification": (None, "classifier"),
    "ForMultipleChoice": (None, "classifier"),
}

# BERT's keys without position_embedding_type (BigBird has none), plus sep_token_id; the
# attention's keys (attention_type, block_size, num_random_blocks) are read in config_from_hf.
CONFIG_MAP = ConfigMap(
    "BigBird", ENCODER_FIELDS + same("classifier_dropout", "sep_token_id"),
    constants={"use_bias": True, "rescale_embeddings": False}, checked={"is_decoder": False},
    hf_only={"tie_word_embeddings": True})

_AS_BERT = {"BigBirdModel": "BertModel", "BigBirdForMaskedLM": "BertForMaskedLM",
            "BigBirdForPreTraining": "BertForPreTraining"}


class BigBirdFamily(BertFamily):
  name = "big_bird"
  model_types = ("big_bird",)
  config_class = bigbird.BigBirdConfig
  config_map = CONFIG_MAP
  architectures = {
      "BigBirdModel": ("last_hidden_state", "pooler_output"),
      "BigBirdForPreTraining": ("prediction_logits", "seq_relationship_logits"),
      "BigBirdForMaskedLM": ("logits",),
      **tasks.architectures("BigBird", bigbird_tasks.KINDS),
  }
  task_heads = TASK_HEADS
  pooled_kinds = bigbird_tasks.POOLED
  pooler_layer = "pooler"  # a bare Linear (BERT's is `pooler.dense`)
  task_models = bigbird_tasks
  # The MLM model's checkpoint also holds the (unused) pooler.
  ignored_keys = BertFamily.ignored_keys + (r"bert\.pooler\.(weight|bias)",)

  # attention_type, block_size and num_random_blocks <-> the attention (None: full).
  def config_from_hf(self, hf_config: Mapping[str, Any]) -> bigbird.BigBirdConfig:
    kind = hf_config.get("attention_type", "block_sparse")
    if kind not in ("block_sparse", "original_full"):
      raise ValueError(f"BigBird attention_type={kind!r}; expected block_sparse or original_full.")
    spec = None
    if kind == "block_sparse":
      spec = sparse.BigBird(block_size=hf_config.get("block_size", 64),
                            num_random_blocks=hf_config.get("num_random_blocks", 3),
                            random_seed=0, eval_plan="zeros",
                            plan_max_length=hf_config.get("max_position_embeddings", 4096))
    return super().config_from_hf(hf_config).replace(attention=spec)

  def config_to_hf(self, config: bigbird.BigBirdConfig, architecture: str) -> dict:
    hf = super().config_to_hf(config, architecture)
    spec = config.attention
    hf["attention_type"] = "original_full" if spec is None else "block_sparse"
    if spec is not None:
      hf.update(block_size=spec.block_size, num_random_blocks=spec.num_random_blocks)
    return hf

  def make_module(self, architecture: str, config: bigbird.BigBirdConfig):
    return super().make_module(_AS_BERT.get(architecture, architecture), config)

  def model_rules(self, architecture: str, config: bigbird.BigBirdConfig) -> list[Rule]:
    return super().model_rules(_AS_BERT.get(architecture, architecture), config)

  # The question-answering head has a feed-forward block before its output layer.
  def task_head_rules(self, kind: str, config: bigbird.BigBirdConfig) -> list[Rule]:
    if kind == "ForQuestionAnswering":
      return question_answering_head_rules()
    return super().task_head_rules(kind, config)


def question_answering_head_rules(hf: str = "qa_classifier.", ours: str = "head/") -> list[Rule]:
  """BigBirdForQuestionAnsweringHead: a feed-forward block and LayerNorm before qa_outputs."""
  return (linear(f"{hf}intermediate.dense", f"{ours}mlp/intermediate")
          + linear(f"{hf}output.dense", f"{ours}mlp/output")
          + layer_norm(f"{hf}output.LayerNorm", f"{ours}mlp_norm")
          + linear(f"{hf}qa_outputs", f"{ours}out"))
