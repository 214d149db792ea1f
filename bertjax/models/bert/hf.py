"""BERT <-> transformers' BertModel / BertForPreTraining / BertForMaskedLM and the task
classes BertFor{SequenceClassification, TokenClassification, QuestionAnswering,
MultipleChoice}."""
from bertjax.hf import tasks
from bertjax.hf.config_map import COMPUTE_DTYPE, ConfigMap, Field, same
from bertjax.hf.family import Family
from bertjax.hf.mapping import Rule, embedding, layer_norm, linear, qkv_projections
from bertjax.models import bert
from bertjax.models.bert import tasks as bert_tasks

# The config.json keys of BERT-style encoders and the EncoderConfig fields they carry
# (BERT's descendants, ALBERT, ELECTRA and DeBERTa add their own).
ENCODER_FIELDS = (
    *same("vocab_size", "hidden_size"),
    Field("num_hidden_layers", "num_layers"),
    Field("num_attention_heads", "num_heads"),
    *same("intermediate_size", "hidden_act"),
    Field("hidden_dropout_prob", "hidden_dropout"),
    Field("attention_probs_dropout_prob", "attention_dropout"),
    *same("max_position_embeddings", "type_vocab_size", "layer_norm_eps", "initializer_range",
          "pad_token_id"),
    COMPUTE_DTYPE,
)

CONFIG_MAP = ConfigMap(
    "BERT", ENCODER_FIELDS + same("classifier_dropout"),
    constants={"position_embedding_type": "absolute"},
    hf_only={"tie_word_embeddings": True})

# Task kind -> the transformers layers of its head: (hidden dense or None, output layer).
TASK_HEADS = {
    "ForSequenceClassification": (None, "classifier"),
    "ForTokenClassification": (None, "classifier"),
    "ForQuestionAnswering": (None, "qa_outputs"),
    "ForMultipleChoice": (None, "classifier"),
}


def encoder_rules(hf: str, ours: str) -> list[Rule]:
  """Embeddings + Transformer stack of a BERT-style encoder (`hf`/`ours` are prefixes)."""
  layer = f"{hf}encoder.layer.{{layer}}."
  stack = f"{ours}encoder/layers/"
  return [
      *embedding_rules(f"{hf}embeddings.", f"{ours}embeddings/",
                       ("word_embeddings", "position_embeddings", "token_type_embeddings")),
      *qkv_projections(f"{layer}attention.self.", f"{stack}attention/"),
      *linear(f"{layer}attention.output.dense", f"{stack}attention/out", in_dims=2),
      *layer_norm(f"{layer}attention.output.LayerNorm", f"{stack}attention_norm"),
      *linear(f"{layer}intermediate.dense", f"{stack}mlp/intermediate"),
      *linear(f"{layer}output.dense", f"{stack}mlp/output"),
      *layer_norm(f"{layer}output.LayerNorm", f"{stack}mlp_norm"),
  ]


def embedding_rules(hf: str, ours: str, tables: tuple[str, ...], norm: str = "LayerNorm"
                    ) -> list[Rule]:
  """BERT-style embeddings: the lookup `tables` (named alike on both sides) and their norm."""
  return ([embedding(f"{hf}{name}", f"{ours}{name}") for name in tables]
          + layer_norm(f"{hf}{norm}", f"{ours}layer_norm"))


def mlm_head_rules(hf: str = "cls.predictions.", ours: str = "mlm_head/") -> list[Rule]:
  return lm_transform_rules(f"{hf}transform.dense", f"{hf}transform.LayerNorm", f"{hf}bias", ours)


def lm_transform_rules(dense: str, norm: str, bias: str, ours: str) -> list[Rule]:
  """An MLM head (models.bert.model.MlmHead): a dense + LayerNorm transform, then the decoder's
  `bias` (transformers' layer names are given whole: they differ by family)."""
  return (linear(dense, f"{ours}transform") + layer_norm(norm, f"{ours}transform_norm")
          + [Rule(bias, f"{ours}bias")])


class BertFamily(Family):
  name = "bert"
  model_types = ("bert",)
  config_class = bert.BertConfig  # families reusing BERT's config.json keys override this
  config_map = CONFIG_MAP
  architectures = {
      "BertModel": ("last_hidden_state", "pooler_output"),
      "BertForPreTraining": ("prediction_logits", "seq_relationship_logits"),
      "BertForMaskedLM": ("logits",),
      **tasks.architectures("Bert", bert_tasks.KINDS),
  }
  task_encoder_prefix = "bert."
  task_heads = TASK_HEADS
  pooled_kinds = bert_tasks.POOLED
  # position_ids is a buffer; the decoder is tied to the word embeddings and its bias.
  ignored_keys = (r".*position_ids", r"cls\.predictions\.decoder\.(weight|bias)")
  modules = {"BertModel": bert.BertModel, "BertForPreTraining": bert.BertForPreTraining,
             "BertForMaskedLM": bert.BertForMaskedLM}
  task_models = bert_tasks

  def encoder_rules(self, hf: str, ours: str, config: bert.BertConfig) -> list[Rule]:
    return encoder_rules(hf, ours)

  def model_rules(self, architecture: str, config: bert.BertConfig) -> list[Rule]:
    if architecture == "BertModel":
      return self.encoder_rules("", "", config) + self.pooler_rules("", "")
    rules = self.encoder_rules("bert.", "bert/", config) + mlm_head_rules()
    if architecture == "BertForPreTraining":
      rules += self.pooler_rules("bert.", "bert/") + linear("cls.seq_relationship", "nsp_head")
    return rules
