"""ModernBERT <-> transformers' ModernBertModel, ModernBertForMaskedLM and the task classes
ModernBertFor{SequenceClassification, TokenClassification, QuestionAnswering,
MultipleChoice}.

transformers fuses the query, key and value projections into one `Wqkv` [3E, E] and the
GeGLU's two input projections into one `Wi` [2I, E] (input half first, gate half second).
`state_from_hf` splits both into per-projection tensors so the rules are plain `linear`
ones; `state_to_hf` fuses them back. The MLM decoder's weight is the token table (tied).
"""
import re
from typing import Any, Mapping

import numpy as np

from bertjax.hf import tasks
from bertjax.hf.config_map import COMPUTE_DTYPE, ConfigMap, Field, same
from bertjax.hf.family import Family
from bertjax.hf.mapping import Rule, embedding, layer_norm, linear
from bertjax.models import modernbert
from bertjax.models.modernbert import tasks as modernbert_tasks

# The layer pattern and rotary bases are read from either layout in config_from_hf (transformers
# 5 reads layer_types / rope_parameters, earlier versions the keys written here too).
CONFIG_MAP = ConfigMap(
    "ModernBERT",
    (*same("vocab_size", "hidden_size", "intermediate_size"),
     Field("num_hidden_layers", "num_layers"), Field("num_attention_heads", "num_heads"),
     Field("hidden_activation", "hidden_act"),
     *same("max_position_embeddings", "initializer_range"),
     Field("norm_eps", "layer_norm_eps"),
     *same("norm_bias", "pad_token_id", "cls_token_id", "sep_token_id"),
     Field("bos_token_id", "cls_token_id", read=False),
     Field("eos_token_id", "sep_token_id", read=False),
     *same("attention_bias", "attention_dropout", "local_attention", "embedding_dropout",
           "mlp_bias"),
     Field("mlp_dropout", "hidden_dropout"),
     *same("decoder_bias", "classifier_pooling"),
     Field("classifier_dropout", "classifier_dropout", to_hf=lambda rate: rate or 0.0,
           from_hf=lambda rate: 0.0 if rate is None else rate),
     *same("classifier_bias", "classifier_activation"),
     Field("global_attn_every_n_layers", "global_attn_every_n_layers", read=False),
     Field("global_rope_theta", "rotary_base", read=False),
     Field("local_rope_theta", "local_rotary_base", read=False),
     COMPUTE_DTYPE),
    constants={"tie_word_embeddings": True},
    reasons={"tie_word_embeddings": "bertjax's ModernBERT ties the MLM decoder to the token "
                                    "embeddings, as the published models do"})
# transformers' layer_types names.
_GLOBAL, _LOCAL = "full_attention", "sliding_attention"
# The fused tensors and the parts they split into, in order.
_FUSED = {"attn.Wqkv": ("query", "key", "value"), "mlp.Wi": ("input", "gate")}
_FUSED_KEY = re.compile(r"(.*\.(?:attn\.Wqkv|mlp\.Wi))\.(weight|bias)")
_PART_KEY = re.compile(r"(.*\.(?:attn\.Wqkv|mlp\.Wi))\.(\w+)\.(weight|bias)")


def _fused_name(prefix: str) -> str:
  """'attn.Wqkv' for 'model.layers.3.attn.Wqkv'."""
  return ".".join(prefix.split(".")[-2:])


def _norm(hf: str, ours: str, config) -> list[Rule]:
  return layer_norm(hf, ours, bias=config.norm_bias)


def encoder_rules(hf: str, ours: str, config) -> list[Rule]:
  """ModernBertModel's tensors (`hf` / `ours`: the prefixes of its tensors)."""
  rules = [embedding(f"{hf}embeddings.tok_embeddings", f"{ours}embeddings/word_embeddings"),
           *_norm(f"{hf}embeddings.norm", f"{ours}embeddings/norm", config)]
  for i in range(config.num_layers):
    layer, stack = f"{hf}layers.{i}.", f"{ours}layers_{i}/"
    if i:  # the first layer has no attention norm
      rules += _norm(f"{layer}attn_norm", f"{stack}attention_norm", config)
    for part in _FUSED["attn.Wqkv"]:
      rules += linear(f"{layer}attn.Wqkv.{part}", f"{stack}attention/{part}",
                      bias=config.attention_bias, bias_kind="bias")
    rules += linear(f"{layer}attn.Wo", f"{stack}attention/out", 2, bias=config.attention_bias)
    rules += _norm(f"{layer}mlp_norm", f"{stack}mlp_norm", config)
    rules += linear(f"{layer}mlp.Wi.input", f"{stack}mlp/intermediate", bias=config.mlp_bias)
    rules += linear(f"{layer}mlp.Wi.gate", f"{stack}mlp/intermediate_linear",
                    bias=config.mlp_bias)
    rules += linear(f"{layer}mlp.Wo", f"{stack}mlp/output", bias=config.mlp_bias)
  return rules + _norm(f"{hf}final_norm", f"{ours}final_norm", config)


def head_rules(hf: str, ours: str, config) -> list[Rule]:
  """transformers' ModernBertPredictionHead (`head.dense`, `head.norm`)."""
  return (linear(f"{hf}dense", f"{ours}/dense", bias=config.classifier_bias)
          + _norm(f"{hf}norm", f"{ours}/norm", config))


def _rope_theta(hf_config: Mapping[str, Any], layer_type: str, old_key: str, default: float):
  """A rotary base from either config.json layout: transformers 5's rope_parameters or the
  older global_rope_theta / local_rope_theta."""
  params = (hf_config.get("rope_parameters") or {}).get(layer_type) or {}
  if params.get("rope_type", "default") != "default" or hf_config.get("rope_scaling"):
    raise ValueError(f"config.json: rotary scaling ({params or hf_config.get('rope_scaling')}) "
                     "is not supported for ModernBERT; only rope_type 'default' is.")
  return float(params.get("rope_theta", hf_config.get(old_key, default)))


def _every_n(hf_config: Mapping[str, Any]) -> int:
  """global_attn_every_n_layers, checked against layer_types when config.json has them."""
  layer_types = hf_config.get("layer_types")
  if not layer_types:
    return int(hf_config.get("global_attn_every_n_layers", 3))
  global_layers = [i for i, kind in enumerate(layer_types) if kind == _GLOBAL]
  every = global_layers[1] if len(global_layers) > 1 else len(layer_types)
  if layer_types != _layer_types(len(layer_types), every):
    raise ValueError(f"config.json: layer_types {layer_types} is not one global layer every n "
                     "(from the first) with sliding-window layers between, the only pattern "
                     "bertjax's ModernBERT builds.")
  return every


def _layer_types(num_layers: int, every: int) -> list[str]:
  return [_GLOBAL if i % every == 0 else _LOCAL for i in range(num_layers)]


def _rope(theta: float) -> dict:
  return {"rope_type": "default", "rope_theta": theta}


class ModernBertFamily(Family):
  name = "modernbert"
  config_class = modernbert.ModernBertConfig
  config_map = CONFIG_MAP
  model_types = ("modernbert",)
  architectures = {
      "ModernBertModel": ("last_hidden_state",),
      "ModernBertForMaskedLM": ("logits",),
      **tasks.architectures("ModernBert", modernbert_tasks.KINDS),
  }
  # The MLM decoder's weight is the token table.
  ignored_keys = (r"decoder\.weight",)
  task_encoder_prefix = "model."
  modules = {"ModernBertModel": modernbert.ModernBertModel,
             "ModernBertForMaskedLM": modernbert.ModernBertForMaskedLM}
  task_models = modernbert_tasks

  # The rotary bases and the global-layer pattern, each in two layouts (_rope_theta, _every_n).
  def config_from_hf(self, hf_config: Mapping[str, Any]) -> modernbert.ModernBertConfig:
    return modernbert.ModernBertConfig(
        **self.config_map.read(hf_config),
        rotary_base=_rope_theta(hf_config, _GLOBAL, "global_rope_theta", 160000.0),
        local_rotary_base=_rope_theta(hf_config, _LOCAL, "local_rope_theta", 10000.0),
        global_attn_every_n_layers=_every_n(hf_config))

  def config_to_hf(self, config: modernbert.ModernBertConfig, architecture: str) -> dict:
    return {**super().config_to_hf(config, architecture),
            "layer_types": _layer_types(config.num_layers, config.global_attn_every_n_layers),
            "rope_parameters": {_GLOBAL: _rope(config.rotary_base),
                                _LOCAL: _rope(config.local_rotary_base)}}

  def encoder_rules(self, hf: str, ours: str, config: modernbert.ModernBertConfig) -> list[Rule]:
    return encoder_rules(hf, ours, config)

  # Every kind's head is the prediction head (dense, norm) and `classifier`.
  def task_head_rules(self, kind: str, config: modernbert.ModernBertConfig) -> list[Rule]:
    return head_rules("head.", "head", config) + linear("classifier", "head/out")

  def model_rules(self, architecture: str, config: modernbert.ModernBertConfig) -> list[Rule]:
    if architecture == "ModernBertModel":
      return encoder_rules("", "", config)
    rules = encoder_rules("model.", "model/", config) + head_rules("head.", "mlm_head", config)
    return rules + ([Rule("decoder.bias", "mlm_head/bias")] if config.decoder_bias else [])

  def state_from_hf(self, state: Mapping[str, Any], config: Any) -> dict:
    out = {}
    for key, tensor in state.items():
      fused = _FUSED_KEY.fullmatch(key)
      if not fused:
        out[key] = tensor
        continue
      prefix, kind = fused.groups()
      parts = _FUSED[_fused_name(prefix)]
      for part, piece in zip(parts, np.split(np.asarray(tensor), len(parts), axis=0)):
        out[f"{prefix}.{part}.{kind}"] = piece
    return out

  def state_to_hf(self, state: Mapping[str, Any], config: Any) -> dict:
    out, fused = {}, {}
    for key, tensor in state.items():
      match = _PART_KEY.fullmatch(key)
      if match:
        prefix, part, kind = match.groups()
        fused.setdefault((prefix, kind), {})[part] = tensor
      else:
        out[key] = tensor
    for (prefix, kind), parts in fused.items():
      order = _FUSED[_fused_name(prefix)]
      out[f"{prefix}.{kind}"] = np.ascontiguousarray(np.concatenate([parts[p] for p in order]))
    return out
