"""DistilBERT <-> transformers' DistilBertModel / DistilBertForMaskedLM and the task classes
DistilBertFor{SequenceClassification, TokenClassification, QuestionAnswering,
MultipleChoice}."""
from bertjax.hf import tasks
from bertjax.hf.config_map import COMPUTE_DTYPE, ConfigMap, Field, same
from bertjax.hf.family import Family
from bertjax.hf.mapping import Rule, layer_norm, linear, qkv_projections
from bertjax.models import distilbert
from bertjax.models.bert.hf import embedding_rules, lm_transform_rules
from bertjax.models.distilbert import tasks as distilbert_tasks

# The reference has no token types and fixes LayerNorm eps at 1e-12 (our config's defaults).
# `sinusoidal_pos_embds` only changes how the reference *initialises* its position table; the
# table itself is in the checkpoint, so the forward pass is the same.
CONFIG_MAP = ConfigMap(
    "DistilBERT",
    (*same("vocab_size"), Field("dim", "hidden_size"), Field("n_layers", "num_layers"),
     Field("n_heads", "num_heads"), Field("hidden_dim", "intermediate_size"),
     Field("activation", "hidden_act"), Field("dropout", "hidden_dropout"),
     *same("attention_dropout", "max_position_embeddings", "initializer_range", "pad_token_id",
           "seq_classif_dropout", "qa_dropout"),
     COMPUTE_DTYPE),
    hf_only={"sinusoidal_pos_embds": False, "tie_word_embeddings": True})

# Task kind -> the transformers layers of its head: (hidden dense or None, output layer).
TASK_HEADS = {
    "ForSequenceClassification": ("pre_classifier", "classifier"),
    "ForTokenClassification": (None, "classifier"),
    "ForQuestionAnswering": (None, "qa_outputs"),
    "ForMultipleChoice": ("pre_classifier", "classifier"),
}


def encoder_rules(hf: str, ours: str) -> list[Rule]:
  layer = f"{hf}transformer.layer.{{layer}}."
  stack = f"{ours}encoder/layers/"
  return [
      *embedding_rules(f"{hf}embeddings.", f"{ours}embeddings/",
                       ("word_embeddings", "position_embeddings")),
      *qkv_projections(f"{layer}attention.", f"{stack}attention/",
                       {"q_lin": "query", "k_lin": "key", "v_lin": "value"}),
      *linear(f"{layer}attention.out_lin", f"{stack}attention/out", in_dims=2),
      *layer_norm(f"{layer}sa_layer_norm", f"{stack}attention_norm"),
      *linear(f"{layer}ffn.lin1", f"{stack}mlp/intermediate"),
      *linear(f"{layer}ffn.lin2", f"{stack}mlp/output"),
      *layer_norm(f"{layer}output_layer_norm", f"{stack}mlp_norm"),
  ]


def mlm_head_rules() -> list[Rule]:
  return lm_transform_rules("vocab_transform", "vocab_layer_norm", "vocab_projector.bias",
                            "mlm_head/")


class DistilBertFamily(Family):
  name = "distilbert"
  config_class = distilbert.DistilBertConfig
  config_map = CONFIG_MAP
  model_types = ("distilbert",)
  architectures = {
      "DistilBertModel": ("last_hidden_state",),
      "DistilBertForMaskedLM": ("logits",),
      **tasks.architectures("DistilBert", distilbert_tasks.KINDS),
  }
  # The projector's weight is tied to the word embeddings (its bias is not).
  ignored_keys = (r".*position_ids", r"vocab_projector\.weight")
  task_encoder_prefix = "distilbert."
  task_heads = TASK_HEADS
  modules = {"DistilBertModel": distilbert.DistilBertModel,
             "DistilBertForMaskedLM": distilbert.DistilBertForMaskedLM}
  task_models = distilbert_tasks

  # A config whose LayerNorm eps transformers cannot represent is refused.
  def config_to_hf(self, config: distilbert.DistilBertConfig, architecture: str) -> dict:
    if config.layer_norm_eps != 1e-12:
      raise ValueError(f"DistilBERT's reference fixes LayerNorm eps at 1e-12; this config has "
                       f"{config.layer_norm_eps}, which transformers cannot represent.")
    return super().config_to_hf(config, architecture)

  def encoder_rules(self, hf: str, ours: str, config: distilbert.DistilBertConfig) -> list[Rule]:
    return encoder_rules(hf, ours)

  def model_rules(self, architecture: str, config: distilbert.DistilBertConfig) -> list[Rule]:
    if architecture == "DistilBertModel":
      return encoder_rules("", "")
    return encoder_rules("distilbert.", "distilbert/") + mlm_head_rules()
