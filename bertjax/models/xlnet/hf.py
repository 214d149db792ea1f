"""XLNet <-> transformers' XLNetModel / XLNetLMHeadModel and the task classes
XLNetFor{SequenceClassification, TokenClassification, QuestionAnsweringSimple,
MultipleChoice} (models/xlnet/tasks.py).

transformers keeps XLNet's memory time-major, a list of [M, B, H] per layer; our modules
take and return one [layers, B, M, H] array. `prepare_inputs` / `outputs` convert, so
`HFModel(mems=hf_outputs.mems)` and our `mems` output line up with the reference's.
"""
from typing import Any, Mapping

import jax.numpy as jnp
import numpy as np

from bertjax.hf import tasks
from bertjax.hf.config_map import COMPUTE_DTYPE, ConfigMap, Field, same
from bertjax.hf.family import Family
from bertjax.hf.mapping import Rule, embedding, layer_norm, linear
from bertjax.models import xlnet
from bertjax.models.xlnet import tasks as xlnet_tasks

_PUBLISHED = "XLNet's sequence summary is supported as published (a tanh projection)"
CONFIG_MAP = ConfigMap(
    "XLNet",
    (*same("vocab_size"), Field("d_model", "hidden_size"), Field("n_layer", "num_layers"),
     Field("n_head", "num_heads"), Field("d_head", "head_dim", read=False),
     Field("d_inner", "intermediate_size"), Field("ff_activation", "hidden_act"),
     Field("dropout", "hidden_dropout"),
     *same("layer_norm_eps", "initializer_range", "attn_type", "bi_data", "clamp_len",
           "same_length", "mem_len", "reuse_len", "pad_token_id", "summary_type",
           "summary_last_dropout"),
     COMPUTE_DTYPE),
    constants={"summary_use_proj": True, "summary_activation": "tanh",
               "tie_word_embeddings": True},
    checked={"summary_proj_to_labels": False, "summary_first_dropout": 0},
    reasons={"summary_use_proj": _PUBLISHED, "summary_activation": _PUBLISHED,
             "tie_word_embeddings": "the LM head is the word-embedding matrix"})

# Task kind -> the transformers layers of its head: (hidden dense or None, output layer).
TASK_HEADS = {
    "ForSequenceClassification": ("sequence_summary.summary", "logits_proj"),
    "ForTokenClassification": (None, "classifier"),
    "ForQuestionAnsweringSimple": (None, "qa_outputs"),
    "ForMultipleChoice": ("sequence_summary.summary", "logits_proj"),
}


def transformer_rules(hf: str, ours: str) -> list[Rule]:
  """The XLNet body; `hf` / `ours` are the prefixes of the base model's tensors."""
  layer = f"{hf}layer.{{layer}}."
  stack = f"{ours}layers/"
  attn = [Rule(f"{layer}rel_attn.{name}", f"{stack}attention/{name}")
          for name in ("q", "k", "v", "o", "r", "r_w_bias", "r_r_bias", "r_s_bias", "seg_embed")]
  return [
      embedding(f"{hf}word_embedding", f"{ours}word_embeddings"),
      Rule(f"{hf}mask_emb", f"{ours}mask_emb"),
      *attn,
      *layer_norm(f"{layer}rel_attn.layer_norm", f"{stack}attention/layer_norm"),
      *linear(f"{layer}ff.layer_1", f"{stack}mlp/intermediate"),
      *linear(f"{layer}ff.layer_2", f"{stack}mlp/output"),
      *layer_norm(f"{layer}ff.layer_norm", f"{stack}mlp_norm"),
  ]


class XLNetFamily(Family):
  name = "xlnet"
  config_class = xlnet.XLNetConfig
  model_types = ("xlnet",)
  config_map = CONFIG_MAP
  architectures = {
      "XLNetModel": ("last_hidden_state", "mems"),
      "XLNetLMHeadModel": ("logits", "mems"),
      **{name: outputs + ("mems",)
         for name, outputs in tasks.architectures("XLNet", xlnet_tasks.KINDS).items()},
  }
  ignored_keys = (r"lm_loss\.weight",)  # tied to the word embeddings
  task_encoder_prefix = "transformer."
  task_heads = TASK_HEADS
  modules = {"XLNetModel": xlnet.XLNetModel, "XLNetLMHeadModel": xlnet.XLNetLMHeadModel}
  task_models = xlnet_tasks

  # d_head is not a field of ours (it is d_model / n_head); one that differs is refused.
  def config_from_hf(self, hf_config: Mapping[str, Any]) -> xlnet.XLNetConfig:
    head_dim = hf_config.get("d_head")
    config = super().config_from_hf(hf_config)
    if head_dim is not None and head_dim != config.head_dim:
      raise ValueError(f"d_head={head_dim} must equal d_model / n_head = {config.head_dim}.")
    return config

  def init_inputs(self, config: xlnet.XLNetConfig) -> dict:
    return {"input_ids": jnp.zeros((2, 8), jnp.int32)}  # even: bi_data halves the batch

  def encoder_rules(self, hf: str, ours: str, config: xlnet.XLNetConfig) -> list[Rule]:
    return transformer_rules(hf, ours)

  def model_rules(self, architecture: str, config: xlnet.XLNetConfig) -> list[Rule]:
    if architecture == "XLNetModel":
      return transformer_rules("", "")
    return transformer_rules("transformer.", "transformer/") + [Rule("lm_loss.bias", "lm_bias")]

  def prepare_inputs(self, inputs: Mapping[str, Any]) -> dict:
    """HF call arguments -> ours: `mems` list of [M, B, H] -> [layers, B, M, H];
    `input_mask` (1 = padding, the original code's convention) -> attention_mask."""
    inputs = dict(inputs)
    mems = inputs.pop("mems", None)
    if mems is not None:
      inputs["mems"] = np.swapaxes(np.stack([np.asarray(m) for m in mems]), 1, 2)
    input_mask = inputs.pop("input_mask", None)
    if input_mask is not None:
      if inputs.get("attention_mask") is not None:
        raise ValueError("Give XLNet either attention_mask or input_mask, not both.")
      inputs["attention_mask"] = 1 - np.asarray(input_mask)
    inputs.pop("use_mems", None)
    return inputs

  def outputs(self, architecture: str, outputs: Mapping[str, Any]) -> dict:
    result = super().outputs(architecture, outputs)
    if "mems" in result:  # back to transformers' time-major layout
      result["mems"] = jnp.swapaxes(result["mems"], 1, 2)
    return result
