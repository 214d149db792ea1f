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

from bertjax.hf.family import Family
from bertjax.hf.mapping import Rule
from bertjax.models import gpt

_CONV1D = re.compile(r"(.*\.(?:c_attn|c_proj|c_fc))\.weight")
_FUSED = re.compile(r"(.*\.attn\.c_attn)\.(weight|bias)")
_QKV = ("q", "k", "v")


def _layer_rules(hf: str, ours: str) -> list[Rule]:
  layer, stack = f"{hf}h.{{layer}}.", f"{ours}decoder/layers/"
  rules = [*[r for part, name in zip(_QKV, ("query", "key", "value")) for r in (
      Rule(f"{layer}attn.c_attn.{part}.weight", f"{stack}attention/{name}/kernel", "linear"),
      Rule(f"{layer}attn.c_attn.{part}.bias", f"{stack}attention/{name}/bias", "bias"))],
           Rule(f"{layer}attn.c_proj.weight", f"{stack}attention/out/kernel", "linear", 2),
           Rule(f"{layer}attn.c_proj.bias", f"{stack}attention/out/bias"),
           Rule(f"{layer}mlp.c_fc.weight", f"{stack}mlp/intermediate/kernel", "linear"),
           Rule(f"{layer}mlp.c_fc.bias", f"{stack}mlp/intermediate/bias"),
           Rule(f"{layer}mlp.c_proj.weight", f"{stack}mlp/output/kernel", "linear"),
           Rule(f"{layer}mlp.c_proj.bias", f"{stack}mlp/output/bias")]
  # Both references call the attention's norm ln_1, before (GPT-2) or after (GPT) it.
  for hf_norm, our_norm in (("ln_1", "attention_norm"), ("ln_2", "mlp_norm")):
    rules += [Rule(f"{layer}{hf_norm}.weight", f"{stack}{our_norm}/scale"),
              Rule(f"{layer}{hf_norm}.bias", f"{stack}{our_norm}/bias")]
  return rules


class _GPTFamily(Family):
  """What GPT and GPT-2 share; subclasses name the tables and config keys."""
  config_class = gpt.GPTConfig
  token_table = position_table = ""

  def rules(self, architecture: str, config: gpt.GPTConfig) -> list[Rule]:
    hf = "transformer." if architecture.endswith("LMHeadModel") else ""
    ours = "transformer/" if architecture.endswith("LMHeadModel") else ""
    rules = [Rule(f"{hf}{self.token_table}.weight", f"{ours}token_embeddings/embedding"),
             Rule(f"{hf}{self.position_table}.weight", f"{ours}position_embeddings/embedding"),
             *_layer_rules(hf, ours)]
    if config.pre_norm:
      rules += [Rule(f"{hf}ln_f.weight", f"{ours}final_norm/scale"),
                Rule(f"{hf}ln_f.bias", f"{ours}final_norm/bias")]
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


def _check_supported(hf: Mapping[str, Any], unsupported: Mapping[str, Any]) -> None:
  for key, default in unsupported.items():
    if hf.get(key, default) != default:
      raise ValueError(f"config.json sets {key}={hf[key]!r}; bertjax's GPT supports only "
                       f"{key}={default!r}.")


class GPT2Family(_GPTFamily):
  name = "gpt2"
  model_types = ("gpt2",)
  architectures = {"GPT2LMHeadModel": ("logits",), "GPT2Model": ("last_hidden_state",)}
  token_table, position_table = "wte", "wpe"
  ignored_keys = (r"lm_head\.weight", r".*\.attn\.(bias|masked_bias)")

  def config_from_hf(self, hf: Mapping[str, Any]) -> gpt.GPTConfig:
    _check_supported(hf, {"scale_attn_weights": True, "scale_attn_by_inverse_layer_idx": False,
                          "reorder_and_upcast_attn": False, "add_cross_attention": False})
    hidden = hf.get("n_embd", 768)
    return gpt.GPTConfig(
        vocab_size=hf.get("vocab_size", 50257), hidden_size=hidden,
        num_layers=hf.get("n_layer", 12), num_heads=hf.get("n_head", 12),
        intermediate_size=hf.get("n_inner") or 4 * hidden,
        max_position_embeddings=hf.get("n_positions", 1024),
        activation=hf.get("activation_function", "gelu_new"),
        hidden_dropout=hf.get("resid_pdrop", 0.1), embedding_dropout=hf.get("embd_pdrop", 0.1),
        attention_dropout=hf.get("attn_pdrop", 0.1),
        layer_norm_eps=hf.get("layer_norm_epsilon", 1e-5), pre_norm=True,
        init_std=hf.get("initializer_range", 0.02), bos_token_id=hf.get("bos_token_id", 50256),
        eos_token_id=hf.get("eos_token_id", 50256), pad_token_id=hf.get("pad_token_id"))

  def config_to_hf(self, config: gpt.GPTConfig, architecture: str) -> dict:
    if not config.pre_norm:
      raise ValueError("A post-LN GPTConfig is OpenAI GPT, not GPT-2; export it as "
                       "OpenAIGPTLMHeadModel / OpenAIGPTModel.")
    return {"model_type": "gpt2", "architectures": [architecture],
            "vocab_size": config.vocab_size, "n_embd": config.hidden_size,
            "n_layer": config.num_layers, "n_head": config.num_heads,
            "n_inner": config.intermediate_size, "n_positions": config.max_position_embeddings,
            "activation_function": config.activation, "resid_pdrop": config.hidden_dropout,
            "embd_pdrop": config.embedding_dropout, "attn_pdrop": config.attention_dropout,
            "layer_norm_epsilon": config.layer_norm_eps, "initializer_range": config.init_std,
            "bos_token_id": config.bos_token_id, "eos_token_id": config.eos_token_id,
            "pad_token_id": config.pad_token_id, "tie_word_embeddings": True}


# OpenAI GPT's `afn` names; its "gelu" is the tanh approximation.
_OPENAI_ACTIVATIONS = {"gelu": "gelu_new", "relu": "relu", "silu": "silu", "swish": "silu"}


class OpenAIGPTFamily(_GPTFamily):
  name = "openai-gpt"
  model_types = ("openai-gpt",)
  architectures = {"OpenAIGPTLMHeadModel": ("logits",), "OpenAIGPTModel": ("last_hidden_state",)}
  token_table, position_table = "tokens_embed", "positions_embed"
  ignored_keys = (r"lm_head\.weight", r".*\.attn\.bias", r".*position_ids")

  def config_from_hf(self, hf: Mapping[str, Any]) -> gpt.GPTConfig:
    afn = hf.get("afn", "gelu")
    if afn not in _OPENAI_ACTIVATIONS:
      raise ValueError(f"config.json afn={afn!r} is not supported; expected one of "
                       f"{sorted(_OPENAI_ACTIVATIONS)}.")
    hidden = hf.get("n_embd", 768)
    return gpt.GPTConfig(
        vocab_size=hf.get("vocab_size", 40478), hidden_size=hidden,
        num_layers=hf.get("n_layer", 12), num_heads=hf.get("n_head", 12),
        intermediate_size=4 * hidden, max_position_embeddings=hf.get("n_positions", 512),
        activation=_OPENAI_ACTIVATIONS[afn], hidden_dropout=hf.get("resid_pdrop", 0.1),
        embedding_dropout=hf.get("embd_pdrop", 0.1), attention_dropout=hf.get("attn_pdrop", 0.1),
        layer_norm_eps=hf.get("layer_norm_epsilon", 1e-5), pre_norm=False,
        init_std=hf.get("initializer_range", 0.02), bos_token_id=hf.get("bos_token_id"),
        eos_token_id=hf.get("eos_token_id"), pad_token_id=hf.get("pad_token_id"))

  def config_to_hf(self, config: gpt.GPTConfig, architecture: str) -> dict:
    afn = {v: k for k, v in reversed(list(_OPENAI_ACTIVATIONS.items()))}.get(config.activation)
    if config.pre_norm or afn is None or config.intermediate_size != 4 * config.hidden_size:
      raise ValueError("OpenAI GPT is post-LN with a 4x feed-forward and afn in "
                       f"{sorted(_OPENAI_ACTIVATIONS)}; this GPTConfig is not: {config}.")
    return {"model_type": "openai-gpt", "architectures": [architecture],
            "vocab_size": config.vocab_size, "n_embd": config.hidden_size,
            "n_layer": config.num_layers, "n_head": config.num_heads,
            "n_positions": config.max_position_embeddings, "afn": afn,
            "resid_pdrop": config.hidden_dropout, "embd_pdrop": config.embedding_dropout,
            "attn_pdrop": config.attention_dropout, "layer_norm_epsilon": config.layer_norm_eps,
            "initializer_range": config.init_std, "bos_token_id": config.bos_token_id,
            "eos_token_id": config.eos_token_id, "pad_token_id": config.pad_token_id,
            "tie_word_embeddings": True}
