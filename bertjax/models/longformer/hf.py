"""Longformer <-> transformers' LongformerModel / LongformerForMaskedLM and the task classes
LongformerFor{SequenceClassification, TokenClassification, QuestionAnswering,
MultipleChoice} (models/longformer/tasks.py).

Longformer's config.json and tensors are RoBERTa's plus `attention_window` (the full
window 2w, one per layer or one for all) and the global projections of every layer
(`attention.self.{query,key,value}_global`).
"""
import dataclasses
from typing import Any, Mapping

from bertjax.hf import tasks
from bertjax.hf.config_map import same
from bertjax.hf.mapping import Rule, qkv_projections
from bertjax.models.roberta.hf import RobertaFamily, lm_head_rules
from bertjax.layers.long_attention import sparse
from bertjax.models import longformer
from bertjax.models.longformer import tasks as longformer_tasks

# RoBERTa's, with sep_token_id; attention_window is the attention's (config_from_hf).
CONFIG_MAP = dataclasses.replace(RobertaFamily.config_map, model="Longformer",
                                 fields=RobertaFamily.config_map.fields + same("sep_token_id"))


def global_projection_rules(hf: str, ours: str) -> list[Rule]:
  names = {f"{name}_global": f"{name}_global" for name in ("query", "key", "value")}
  return qkv_projections(f"{hf}encoder.layer.{{layer}}.attention.self.",
                         f"{ours}encoder/layers/attention/", names)


class LongformerFamily(RobertaFamily):
  name = "longformer"
  model_types = ("longformer",)
  config_class = longformer.LongformerConfig
  config_map = CONFIG_MAP
  architectures = {
      "LongformerModel": ("last_hidden_state", "pooler_output"),
      "LongformerForMaskedLM": ("logits",),
      **tasks.architectures("Longformer", longformer_tasks.KINDS),
  }
  task_encoder_prefix = "longformer."
  modules = {"LongformerModel": longformer.LongformerModel,
             "LongformerForMaskedLM": longformer.LongformerForMaskedLM}
  task_models = longformer_tasks

  # attention_window (the full window 2w, one per layer or one for all) <-> our attention's w.
  def config_from_hf(self, hf_config: Mapping[str, Any]) -> longformer.LongformerConfig:
    window = hf_config.get("attention_window", 512)
    windows = (window,) if isinstance(window, int) else tuple(window)
    if any(w <= 0 or w % 2 for w in windows):
      raise ValueError(f"Longformer attention_window={window!r}: every window must be a "
                       "positive even number (it is 2w, w neighbours per side).")
    one_sided = tuple(w // 2 for w in windows)
    if len(set(one_sided)) == 1:
      one_sided = one_sided[0]
    elif len(one_sided) != hf_config["num_hidden_layers"]:
      raise ValueError(f"attention_window has {len(one_sided)} entries for "
                       f"{hf_config['num_hidden_layers']} layers.")
    base = super().config_from_hf(hf_config)
    return base.replace(attention=sparse.Longformer(window=one_sided, global_tokens=()))

  def config_to_hf(self, config: longformer.LongformerConfig, architecture: str) -> dict:
    window = config.attention.window
    full = [2 * w for w in window] if isinstance(window, tuple) else 2 * window
    return {**super().config_to_hf(config, architecture), "attention_window": full}

  def encoder_rules(self, hf: str, ours: str, config: longformer.LongformerConfig) -> list[Rule]:
    return super().encoder_rules(hf, ours, config) + global_projection_rules(hf, ours)

  def model_rules(self, architecture: str, config: longformer.LongformerConfig) -> list[Rule]:
    if architecture == "LongformerModel":
      return self.encoder_rules("", "", config) + self.pooler_rules("", "")
    return self.encoder_rules("longformer.", "longformer/", config) + lm_head_rules()
