"""DeBERTa <-> transformers' DebertaModel / DebertaForMaskedLM (model_type 'deberta', v1)
and DebertaV2Model / DebertaV2ForMaskedLM ('deberta-v2', v2 and v3 checkpoints), and their
task classes (models/deberta/tasks.py)."""
from typing import Any, Mapping

from bertjax.models.bert.hf import ENCODER_FIELDS, lm_transform_rules, mlm_head_rules
from bertjax.hf import tasks
from bertjax.hf.config_map import ConfigMap, Field, same
from bertjax.hf.family import Family
from bertjax.hf.mapping import Rule, embedding, layer_norm, linear
from bertjax.models import deberta
from bertjax.models.deberta import tasks as deberta_tasks

# Task kind -> the transformers layers of its head: (hidden dense or None, output layer).
TASK_HEADS = {
    "ForSequenceClassification": ("pooler.dense", "classifier"),
    "ForTokenClassification": (None, "classifier"),
    "ForQuestionAnswering": (None, "qa_outputs"),
    "ForMultipleChoice": ("pooler.dense", "classifier"),
}


def _pos_att_type(value) -> tuple[str, ...]:
  if value is None:
    return ()
  if isinstance(value, str):
    value = value.lower().split("|")
  return tuple(v.strip() for v in value if v.strip() and v.strip() != "none")


def _fields(version: int) -> tuple[Field, ...]:
  """config.json's keys (`default`s: transformers' for a key v1 checkpoints lack). The v2
  keys are read for v1 too, as the same DebertaConfig holds both, but written for v2 only."""
  v2 = version == 2
  return ENCODER_FIELDS + (
      Field("relative_attention", "relative_attention", default=False),
      Field("max_relative_positions", "max_relative_positions"),
      Field("position_biased_input", "position_biased_input", default=True),
      Field("pos_att_type", "pos_att_type", to_hf=list, from_hf=_pos_att_type, default=None),
      Field("legacy", "legacy_mlm_head", default=True),
      Field("embedding_size", "embedding_size", omit_none=True),
      # The task classes' ContextPooler and dropout.
      *same("pooler_dropout", "pooler_hidden_act"),
      Field("pooler_hidden_size", "hidden_size", read=False),
      Field("cls_dropout", "classifier_dropout", omit_none=True),
      Field("position_buckets", "position_buckets", default=-1, written=v2),
      Field("share_att_key", "share_att_key", default=False, written=v2),
      Field("norm_rel_ebd", "norm_rel_ebd", to_hf=lambda norm: "layer_norm" if norm else "none",
            from_hf=lambda value: "layer_norm" in str(value).lower(), default="none",
            written=v2),
  )


def _config_map(version: int) -> ConfigMap:
  return ConfigMap(f"DeBERTa v{version}", _fields(version), checked={"talking_head": False},
                   reasons={"talking_head": "the talking-heads variant is not implemented"},
                   hf_only={"tie_word_embeddings": True})


def embedding_rules(hf: str, ours: str, config: deberta.DebertaConfig) -> list[Rule]:
  e, o = f"{hf}embeddings.", f"{ours}embeddings/"
  rules = [embedding(f"{e}word_embeddings", f"{o}word_embeddings"),
           *layer_norm(f"{e}LayerNorm", f"{o}layer_norm")]
  if config.position_biased_input:
    rules.append(embedding(f"{e}position_embeddings", f"{o}position_embeddings"))
  if config.type_vocab_size:
    rules.append(embedding(f"{e}token_type_embeddings", f"{o}token_type_embeddings"))
  if config.embed_dim != config.hidden_size:
    rules += linear(f"{e}embed_proj", f"{o}embed_proj", bias=False)
  return rules


def _linear(hf: str, ours: str, bias: bool = True) -> list[Rule]:
  return linear(hf, ours, bias=bias, bias_kind="bias")


def attention_rules(hf: str, ours: str, config: deberta.DebertaConfig) -> list[Rule]:
  """The disentangled self-attention of one (stacked) layer."""
  relative = config.relative_attention
  if config.version == 1:
    rules = [Rule(f"{hf}in_proj.weight", f"{ours}in_proj/kernel", "linear"),
             Rule(f"{hf}q_bias", f"{ours}q_bias", "bias"),
             Rule(f"{hf}v_bias", f"{ours}v_bias", "bias")]
    if relative and "c2p" in config.pos_att_type:
      rules += _linear(f"{hf}pos_proj", f"{ours}pos_key", bias=False)
    if relative and "p2c" in config.pos_att_type:
      rules += _linear(f"{hf}pos_q_proj", f"{ours}pos_query")
    return rules
  rules = [r for name in ("query", "key", "value")
           for r in _linear(f"{hf}{name}_proj", f"{ours}{name}")]
  if relative and not config.share_att_key:
    if "c2p" in config.pos_att_type:
      rules += _linear(f"{hf}pos_key_proj", f"{ours}pos_key")
    if "p2c" in config.pos_att_type:
      rules += _linear(f"{hf}pos_query_proj", f"{ours}pos_query")
  return rules


def encoder_rules(hf: str, ours: str, config: deberta.DebertaConfig) -> list[Rule]:
  layer, stack = f"{hf}encoder.layer.{{layer}}.", f"{ours}encoder/stack/layers/"
  rules = embedding_rules(hf, ours, config) + attention_rules(
      f"{layer}attention.self.", f"{stack}attention/", config) + [
      *linear(f"{layer}attention.output.dense", f"{stack}attention/out", in_dims=2),
      *layer_norm(f"{layer}attention.output.LayerNorm", f"{stack}attention_norm"),
      *_linear(f"{layer}intermediate.dense", f"{stack}mlp/intermediate"),
      *_linear(f"{layer}output.dense", f"{stack}mlp/output"),
      *layer_norm(f"{layer}output.LayerNorm", f"{stack}mlp_norm")]
  if config.relative_attention:
    rules.append(embedding(f"{hf}encoder.rel_embeddings", f"{ours}encoder/rel_embeddings"))
    if config.version == 2 and config.norm_rel_ebd:
      rules += layer_norm(f"{hf}encoder.LayerNorm", f"{ours}encoder/rel_norm")
  return rules


def head_rules(config: deberta.DebertaConfig) -> list[Rule]:
  if config.legacy_mlm_head:
    return mlm_head_rules("cls.predictions.", "mlm_head/")
  hf = "lm_predictions.lm_head."
  return lm_transform_rules(f"{hf}dense", f"{hf}LayerNorm", f"{hf}bias", "mlm_head/")


def _check_pooler(hf_config: Mapping[str, Any]) -> None:
  size = hf_config.get("pooler_hidden_size", hf_config.get("hidden_size"))
  if size != hf_config.get("hidden_size"):
    raise ValueError(f"DeBERTa pooler_hidden_size={size} != hidden_size="
                     f"{hf_config.get('hidden_size')} is not supported (transformers' classifier "
                     "reads hidden_size features).")


class DebertaFamily(Family):
  """DeBERTa v1 (model_type 'deberta')."""
  name = "deberta"
  config_class = deberta.DebertaConfig  # v2 / v3 too
  model_types = ("deberta",)
  version = 1
  config_map = _config_map(1)
  prefix = "Deberta"
  task_kinds = deberta_tasks.KINDS_V1
  task_encoder_prefix = "deberta."
  task_heads = TASK_HEADS
  # Buffers, and the legacy head's decoder (tied to the word embeddings and `bias`).
  ignored_keys = (r".*position_ids", r"cls\.predictions\.decoder\.(weight|bias)")

  @property
  def architectures(self):
    return {f"{self.prefix}Model": ("last_hidden_state",),
            f"{self.prefix}ForMaskedLM": ("logits",),
            **tasks.architectures(self.prefix, self.task_kinds)}

  # Checks across keys, and `version`, which is the model_type's.
  def config_from_hf(self, hf_config: Mapping[str, Any]) -> deberta.DebertaConfig:
    if hf_config.get("conv_kernel_size", 0) > 0:
      raise ValueError(f"conv_kernel_size={hf_config['conv_kernel_size']}: DeBERTa-v2's "
                       "convolution layer is not supported (v3 checkpoints do not use it).")
    head_size = hf_config.get("attention_head_size")
    if head_size and head_size * hf_config["num_attention_heads"] != hf_config["hidden_size"]:
      raise ValueError(f"attention_head_size={head_size} != hidden_size / num_attention_heads "
                       "is not supported.")
    _check_pooler(hf_config)
    return deberta.DebertaConfig(**self.config_map.read(hf_config), version=self.version)

  def config_to_hf(self, config: deberta.DebertaConfig, architecture: str) -> dict:
    if config.enhanced_mask_decoder and architecture.endswith("ForMaskedLM"):
      raise ValueError(f"{architecture} has no enhanced mask decoder; export the encoder "
                       f"({self.prefix}Model) or train with enhanced_mask_decoder=False.")
    if config.version != self.version:
      raise ValueError(f"A version-{config.version} DebertaConfig cannot be exported as "
                       f"model_type {self.model_types[0]!r}.")
    return super().config_to_hf(config, architecture)

  def make_module(self, architecture: str, config: deberta.DebertaConfig):
    kind = tasks.kind_of(architecture)
    if kind:
      return deberta_tasks.task_model(kind, config)
    if architecture.endswith("ForMaskedLM"):
      return deberta.DebertaForMaskedLM(config)
    return deberta.DebertaModel(config)

  def encoder_rules(self, hf: str, ours: str, config: deberta.DebertaConfig) -> list[Rule]:
    return encoder_rules(hf, ours, config)

  def model_rules(self, architecture: str, config: deberta.DebertaConfig) -> list[Rule]:
    if architecture.endswith("Model"):
      return encoder_rules("", "", config)
    return encoder_rules("deberta.", "deberta/", config) + head_rules(config)


class DebertaV2Family(DebertaFamily):
  """DeBERTa v2 / v3 (model_type 'deberta-v2')."""
  name = "deberta-v2"
  model_types = ("deberta-v2",)
  version = 2
  config_map = _config_map(2)
  prefix = "DebertaV2"
  task_kinds = deberta_tasks.KINDS
