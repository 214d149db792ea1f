"""T5 <-> transformers' T5Model / T5ForConditionalGeneration (v1.0 and v1.1 configs).

transformers >= 5 always ties `lm_head` to `shared` in memory and records the v1.0
output scaling as `scale_decoder_outputs`; older configs say `tie_word_embeddings:
false` for v1.1. Both spellings are read; an untied head is written as its own tensor
with `tie_word_embeddings: false`, which transformers loads untied.
"""
from typing import Any, Mapping

from bertjax.hf.config_map import ConfigMap, Field, same
from bertjax.hf.mapping import Rule, embedding, linear
from bertjax.hf.seq2seq import Seq2SeqFamily
from bertjax.models import t5

# feed_forward_proj, num_decoder_layers and scale_decoder_outputs are read in config_from_hf.
CONFIG_MAP = ConfigMap(
    "T5",
    (*same("vocab_size"), Field("d_model", "hidden_size"), Field("d_kv", "head_dim"),
     Field("d_ff", "intermediate_size"), *same("num_layers", "num_heads"),
     Field("num_decoder_layers", "num_decoder_layers", read=False),
     Field("relative_attention_num_buckets", "relative_buckets"),
     Field("relative_attention_max_distance", "relative_max_distance"),
     Field("dropout_rate", "hidden_dropout"), Field("layer_norm_epsilon", "layer_norm_eps"),
     *same("tie_word_embeddings"),
     Field("scale_decoder_outputs", "scales_decoder_outputs", read=False),
     *same("initializer_factor", "pad_token_id", "eos_token_id", "decoder_start_token_id")),
    hf_only={"is_encoder_decoder": True}, labels=False)

_ATTENTION = {"q": "query", "k": "key", "v": "value"}


# T5's Linears have no bias, and its norms (RMSNorm) only a scale.
def _linear(hf: str, ours: str, in_dims: int = 1) -> list[Rule]:
  return linear(hf, ours, in_dims, bias=False)


def _norm(hf: str, ours: str) -> Rule:
  return Rule(f"{hf}.weight", f"{ours}/scale")


def _attention_rules(hf: str, ours: str) -> list[Rule]:
  return [*[r for a, b in _ATTENTION.items() for r in _linear(f"{hf}.{a}", f"{ours}/{b}")],
          *_linear(f"{hf}.o", f"{ours}/out", 2)]


def _mlp_rules(hf: str, ours: str, gated: bool) -> list[Rule]:
  inputs = ({"wi_0": "intermediate", "wi_1": "intermediate_linear"} if gated
            else {"wi": "intermediate"})
  return [r for theirs, name in {**inputs, "wo": "output"}.items()
          for r in _linear(f"{hf}.{theirs}", f"{ours}/{name}")]


def stack_rules(side: str, ours: str, gated: bool) -> list[Rule]:
  """One T5Stack: `side` is 'encoder' or 'decoder', `ours` the prefix of our stack."""
  block = f"{side}.block.{{layer}}.layer"
  layers = f"{ours}/layers"
  ff = 2 if side == "decoder" else 1
  rules = [
      embedding(f"{side}.block.0.layer.0.SelfAttention.relative_attention_bias",
                f"{ours}/relative_bias"),
      *_attention_rules(f"{block}.0.SelfAttention", f"{layers}/self_attention"),
      _norm(f"{block}.0.layer_norm", f"{layers}/self_attention_norm"),
      *_mlp_rules(f"{block}.{ff}.DenseReluDense", f"{layers}/mlp", gated),
      _norm(f"{block}.{ff}.layer_norm", f"{layers}/mlp_norm"),
      _norm(f"{side}.final_layer_norm", f"{ours}/final_norm"),
  ]
  if side == "decoder":
    rules += [*_attention_rules(f"{block}.1.EncDecAttention", f"{layers}/cross_attention"),
              _norm(f"{block}.1.layer_norm", f"{layers}/cross_attention_norm")]
  return rules


class T5Family(Seq2SeqFamily):
  name = "t5"
  config_class = t5.T5Config
  config_map = CONFIG_MAP
  model_types = ("t5",)
  architectures = {
      "T5ForConditionalGeneration": ("logits", "encoder_last_hidden_state"),
      "T5Model": ("last_hidden_state", "encoder_last_hidden_state"),
  }
  # The per-stack embed_tokens are the shared table; a tied lm_head is too.
  ignored_keys = (r"(encoder|decoder)\.embed_tokens\.weight", r"lm_head\.weight",
                  r"decoder\.block\.0\.layer\.1\.EncDecAttention\.relative_attention_bias\.weight")
  modules = {"T5ForConditionalGeneration": t5.T5ForConditionalGeneration, "T5Model": t5.T5Model}

  # feed_forward_proj ('relu', 'gated-gelu', ...) <-> hidden_act and gated; a missing (or
  # null) num_decoder_layers is num_layers, a missing scale_decoder_outputs follows the tying.
  def config_from_hf(self, hf: Mapping[str, Any]) -> t5.T5Config:
    projection = hf.get("feed_forward_proj", "relu")
    parts = projection.split("-")
    if len(parts) > 2 or (len(parts) == 2 and parts[0] != "gated"):
      raise ValueError(f"feed_forward_proj={projection!r} is not supported; expected 'ACT' or "
                       "'gated-ACT' (e.g. 'relu', 'gated-gelu').")
    values = self.config_map.read(hf)
    tie = values.get("tie_word_embeddings", True)
    return t5.T5Config(
        **values, hidden_act="gelu_new" if projection == "gated-gelu" else parts[-1],
        gated=len(parts) == 2,
        num_decoder_layers=hf.get("num_decoder_layers") or values.get("num_layers", 6),
        scale_decoder_outputs=hf.get("scale_decoder_outputs", tie))

  def config_to_hf(self, config: t5.T5Config, architecture: str) -> dict:
    if config.gated:
      projection = "gated-gelu" if config.hidden_act == "gelu_new" else f"gated-{config.hidden_act}"
    else:
      projection = config.hidden_act
    return {**super().config_to_hf(config, architecture), "feed_forward_proj": projection}

  def model_rules(self, architecture: str, config: t5.T5Config) -> list[Rule]:
    ours = "transformer/" if architecture == "T5ForConditionalGeneration" else ""
    rules = [embedding("shared", f"{ours}shared"),
             *stack_rules("encoder", f"{ours}encoder", config.gated),
             *stack_rules("decoder", f"{ours}decoder", config.gated)]
    if architecture == "T5ForConditionalGeneration" and not config.tie_word_embeddings:
      rules += _linear("lm_head", "lm_head")
    return rules
