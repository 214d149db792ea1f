"""OpenAI GPT and GPT-2 <-> transformers' OpenAIGPT{Model,LMHeadModel} / GPT2{Model,LMHeadModel}.

Both references store their projections as Conv1D: weights [in, out], and the query,
key and value projections fused into one `c_attn` [E, 3E]. `state_from_hf` splits the
fused tensor and transposes every Conv1D weight to torch-Linear layout so the rules are
plain `linear` rules; `state_to_hf` undoes it. The output projection is tied to the
token table (not stored separately).
"""
import re
from typing import Any, Mapping

import numpy as np

from bertjax.hf.config_map import ConfigMap, Field, same
from bertjax.hf.family import Family
from bertjax.hf.mapping import Rule, embedding, layer_norm, linear, qkv_projections
from bertjax.models import gpt

_CONV1D = re.compile(r"(.*\.(?:c_attn|c_proj|c_fc))\.weight")
_FUSED = re.compile(r"(.*\.attn\.c_attn)\.(weight|bias)")
_QKV = ("q", "k", "v")


def _layer_rules(hf: str, ours: str) -> list[Rule]:
  layer, stack = f"{hf}h.{{layer}}.", f"{ours}decoder/layers/"
  rules = [*qkv_projections(f"{layer}attn.c_attn.", f"{stack}attention/",
                            dict(zip(_QKV, ("query", "key", "value")))),
           *linear(f"{layer}attn.c_proj", f"{stack}attention/out", 2),
           *linear(f"{layer}mlp.c_fc", f"{stack}mlp/intermediate"),
           *linear(f"{layer}mlp.c_proj", f"{stack}mlp/output")]
  # Both references call the attention's norm ln_1, before (GPT-2) or after (GPT) it.
  for hf_norm, our_norm in (("ln_1", "attention_norm"), ("ln_2", "mlp_norm")):
    rules += layer_norm(f"{layer}{hf_norm}", f"{stack}{our_norm}")
  return rules


class _GPTFamily(Family):
  """What GPT and GPT-2 share; subclasses name the tables and config keys."""
  config_class = gpt.GPTConfig
  token_table = position_table = ""

  def model_rules(self, architecture: str, config: gpt.GPTConfig) -> list[Rule]:
    hf = "transformer." if architecture.endswith("LMHeadModel") else ""
    ours = "transformer/" if architecture.endswith("LMHeadModel") else ""
    rules = [embedding(f"{hf}{self.token_table}", f"{ours}token_embeddings"),
             embedding(f"{hf}{self.position_table}", f"{ours}position_embeddings"),
             *_layer_rules(hf, ours)]
    if config.pre_norm:
      rules += layer_norm(f"{hf}ln_f", f"{ours}final_norm")
    return rules

  def make_module(self, architecture: str, config: gpt.GPTConfig):
    return gpt.GPTLMHeadModel(config) if architecture.endswith("LMHeadModel") \
        else gpt.GPTModel(config)

  def state_from_hf(self, state: Mapping[str, Any], config: Any) -> dict:
    out = {}
    for key, tensor in state.items():
      fused = _FUSED.fullmatch(key)
      if fused:
        for part, piece in zip(_QKV, np.split(np.asarray(tensor), 3, axis=-1)):
          out[f"{fused.group(1)}.{part}.{fused.group(2)}"] = piece.T if piece.ndim == 2 else piece
      elif _CONV1D.fullmatch(key):
        out[key] = np.asarray(tensor).T
      else:
        out[key] = tensor
    return out

  def state_to_hf(self, state: Mapping[str, Any], config: Any) -> dict:
    out, fused = {}, {}
    for key, tensor in state.items():
      match = re.fullmatch(r"(.*\.attn\.c_attn)\.([qkv])\.(weight|bias)", key)
      if match:
        fused.setdefault((match.group(1), match.group(3)), {})[match.group(2)] = tensor
      elif _CONV1D.fullmatch(key):
        out[key] = np.ascontiguousarray(np.asarray(tensor).T)
      else:
        out[key] = tensor
    for (prefix, kind), parts in fused.items():
      pieces = [parts[p].T if kind == "weight" else parts[p] for p in _QKV]
      out[f"{prefix}.{kind}"] = np.ascontiguousarray(np.concatenate(pieces, axis=-1))
    return out


def _shared_fields(vocab_size: int, positions: int, special_token: int | None):
  """The keys GPT and GPT-2 share, with transformers' defaults for a missing key (the two
  differ in vocabulary, context and bos / eos id). The feed-forward width, the activation
  and the norms' place are each family's own."""
  return (
      Field("vocab_size", "vocab_size", default=vocab_size), Field("n_embd", "hidden_size"),
      Field("n_layer", "num_layers"), Field("n_head", "num_heads"),
      Field("n_positions", "max_position_embeddings", default=positions),
      Field("resid_pdrop", "hidden_dropout"), Field("embd_pdrop", "embedding_dropout"),
      Field("attn_pdrop", "attention_dropout"), Field("layer_norm_epsilon", "layer_norm_eps"),
      *same("initializer_range"),
      Field("bos_token_id", "bos_token_id", default=special_token),
      Field("eos_token_id", "eos_token_id", default=special_token), *same("pad_token_id"))


GPT2_CONFIG_MAP = ConfigMap(
    "GPT-2",
    _shared_fields(50257, 1024, 50256)
    + (Field("n_inner", "intermediate_size", read=False),
       Field("activation_function", "hidden_act")),
    checked={"scale_attn_weights": True, "scale_attn_by_inverse_layer_idx": False,
             "reorder_and_upcast_attn": False, "add_cross_attention": False},
    hf_only={"tie_word_embeddings": True}, labels=False)

# OpenAI GPT's `afn` names -> our activations (its "gelu" is the tanh approximation), and back.
_OPENAI_ACTIVATIONS = {"gelu": "gelu_new", "relu": "relu", "silu": "silu", "swish": "silu"}
_OPENAI_AFN = {"gelu_new": "gelu", "relu": "relu", "silu": "silu"}


def _openai_activation(afn: str) -> str:
  if afn not in _OPENAI_ACTIVATIONS:
    raise ValueError(f"config.json afn={afn!r} is not supported; expected one of "
                     f"{sorted(_OPENAI_ACTIVATIONS)}.")
  return _OPENAI_ACTIVATIONS[afn]


OPENAI_CONFIG_MAP = ConfigMap(
    "OpenAI GPT",
    _shared_fields(40478, 512, None)
    + (Field("afn", "hidden_act", to_hf=_OPENAI_AFN.get, from_hf=_openai_activation,
             default="gelu"),),
    hf_only={"tie_word_embeddings": True}, labels=False)


class GPT2Family(_GPTFamily):
  name = "gpt2"
  model_types = ("gpt2",)
  architectures = {"GPT2LMHeadModel": ("logits",), "GPT2Model": ("last_hidden_state",)}
  token_table, position_table = "wte", "wpe"
  config_map = GPT2_CONFIG_MAP
  ignored_keys = (r"lm_head\.weight", r".*\.attn\.(bias|masked_bias)")

  # n_inner: null (or no key) means 4 x n_embd; GPT-2 is pre-LN.
  def config_from_hf(self, hf: Mapping[str, Any]) -> gpt.GPTConfig:
    values = self.config_map.read(hf)
    values["intermediate_size"] = hf.get("n_inner") or 4 * values.get("hidden_size", 768)
    return gpt.GPTConfig(**values, pre_norm=True)

  def config_to_hf(self, config: gpt.GPTConfig, architecture: str) -> dict:
    if not config.pre_norm:
      raise ValueError("A post-LN GPTConfig is OpenAI GPT, not GPT-2; export it as "
                       "OpenAIGPTLMHeadModel / OpenAIGPTModel.")
    return super().config_to_hf(config, architecture)


class OpenAIGPTFamily(_GPTFamily):
  name = "openai-gpt"
  model_types = ("openai-gpt",)
  architectures = {"OpenAIGPTLMHeadModel": ("logits",), "OpenAIGPTModel": ("last_hidden_state",)}
  token_table, position_table = "tokens_embed", "positions_embed"
  config_map = OPENAI_CONFIG_MAP
  ignored_keys = (r"lm_head\.weight", r".*\.attn\.bias", r".*position_ids")

  # OpenAI GPT is post-LN, its feed-forward 4 x n_embd wide (no key says so).
  def config_from_hf(self, hf: Mapping[str, Any]) -> gpt.GPTConfig:
    values = self.config_map.read(hf)
    return gpt.GPTConfig(**values, intermediate_size=4 * values.get("hidden_size", 768),
                         pre_norm=False)

  def config_to_hf(self, config: gpt.GPTConfig, architecture: str) -> dict:
    if (config.pre_norm or config.hidden_act not in _OPENAI_AFN
        or config.intermediate_size != 4 * config.hidden_size):
      raise ValueError("OpenAI GPT is post-LN with a 4x feed-forward and afn in "
                       f"{sorted(_OPENAI_ACTIVATIONS)}; this GPTConfig is not: {config}.")
    return super().config_to_hf(config, architecture)
