"""T5 <-> transformers' T5Model / T5ForConditionalGeneration (v1.0 and v1.1 configs).

transformers >= 5 always ties `lm_head` to `shared` in memory and records the v1.0
output scaling as `scale_decoder_outputs`; older configs say `tie_word_embeddings:
false` for v1.1. Both spellings are read; an untied head is written as its own tensor
with `tie_word_embeddings: false`, which transformers loads untied.
"""
from typing import Any, Mapping

from bertjax.hf.mapping import Rule
from bertjax.hf.seq2seq import Seq2SeqFamily
from bertjax.models import t5

_ATTENTION = {"q": "query", "k": "key", "v": "value"}


def _attention_rules(hf: str, ours: str) -> list[Rule]:
  return [*[Rule(f"{hf}.{a}.weight", f"{ours}/{b}/kernel", "linear") for a, b in _ATTENTION.items()],
          Rule(f"{hf}.o.weight", f"{ours}/out/kernel", "linear", 2)]


def _mlp_rules(hf: str, ours: str, gated: bool) -> list[Rule]:
  inputs = ([Rule(f"{hf}.wi_0.weight", f"{ours}/intermediate/kernel", "linear"),
             Rule(f"{hf}.wi_1.weight", f"{ours}/intermediate_linear/kernel", "linear")]
            if gated else [Rule(f"{hf}.wi.weight", f"{ours}/intermediate/kernel", "linear")])
  return inputs + [Rule(f"{hf}.wo.weight", f"{ours}/output/kernel", "linear")]


def stack_rules(side: str, ours: str, gated: bool) -> list[Rule]:
  """One T5Stack: `side` is 'encoder' or 'decoder', `ours` the prefix of our stack."""
  block = f"{side}.block.{{layer}}.layer"
  layers = f"{ours}/layers"
  ff = 2 if side == "decoder" else 1
  rules = [
      Rule(f"{side}.block.0.layer.0.SelfAttention.relative_attention_bias.weight",
           f"{ours}/relative_bias/embedding"),
      *_attention_rules(f"{block}.0.SelfAttention", f"{layers}/self_attention"),
      Rule(f"{block}.0.layer_norm.weight", f"{layers}/self_attention_norm/scale"),
      *_mlp_rules(f"{block}.{ff}.DenseReluDense", f"{layers}/mlp", gated),
      Rule(f"{block}.{ff}.layer_norm.weight", f"{layers}/mlp_norm/scale"),
      Rule(f"{side}.final_layer_norm.weight", f"{ours}/final_norm/scale"),
  ]
  if side == "decoder":
    rules += [*_attention_rules(f"{block}.1.EncDecAttention", f"{layers}/cross_attention"),
              Rule(f"{block}.1.layer_norm.weight", f"{layers}/cross_attention_norm/scale")]
  return rules


class T5Family(Seq2SeqFamily):
  name = "t5"
  config_class = t5.T5Config
  model_types = ("t5",)
  architectures = {
      "T5ForConditionalGeneration": ("logits", "encoder_last_hidden_state"),
      "T5Model": ("last_hidden_state", "encoder_last_hidden_state"),
  }
  # The per-stack embed_tokens are the shared table; a tied lm_head is too.
  ignored_keys = (r"(encoder|decoder)\.embed_tokens\.weight", r"lm_head\.weight",
                  r"decoder\.block\.0\.layer\.1\.EncDecAttention\.relative_attention_bias\.weight")

  def config_from_hf(self, hf: Mapping[str, Any]) -> t5.T5Config:
    projection = hf.get("feed_forward_proj", "relu")
    parts = projection.split("-")
    if len(parts) > 2 or (len(parts) == 2 and parts[0] != "gated"):
      raise ValueError(f"feed_forward_proj={projection!r} is not supported; expected 'ACT' or "
                       "'gated-ACT' (e.g. 'relu', 'gated-gelu').")
    gated = len(parts) == 2
    activation = "gelu_new" if projection == "gated-gelu" else parts[-1]
    tie = hf.get("tie_word_embeddings", True)
    layers = hf.get("num_layers", 6)
    return t5.T5Config(
        vocab_size=hf.get("vocab_size", 32128), hidden_size=hf.get("d_model", 512),
        head_dim=hf.get("d_kv", 64), intermediate_size=hf.get("d_ff", 2048), num_layers=layers,
        num_decoder_layers=hf.get("num_decoder_layers") or layers,
        num_heads=hf.get("num_heads", 8),
        relative_buckets=hf.get("relative_attention_num_buckets", 32),
        relative_max_distance=hf.get("relative_attention_max_distance", 128),
        dropout_rate=hf.get("dropout_rate", 0.1), layer_norm_eps=hf.get("layer_norm_epsilon", 1e-6),
        activation=activation, gated=gated, tie_word_embeddings=tie,
        scale_decoder_outputs=hf.get("scale_decoder_outputs", tie),
        initializer_factor=hf.get("initializer_factor", 1.0),
        pad_token_id=hf.get("pad_token_id", 0), eos_token_id=hf.get("eos_token_id", 1),
        decoder_start_token_id=hf.get("decoder_start_token_id", 0))

  def config_to_hf(self, config: t5.T5Config, architecture: str) -> dict:
    if config.gated:
      projection = "gated-gelu" if config.activation == "gelu_new" else f"gated-{config.activation}"
    else:
      projection = config.activation
    return {
        "model_type": "t5", "architectures": [architecture], "vocab_size": config.vocab_size,
        "d_model": config.hidden_size, "d_kv": config.head_dim, "d_ff": config.intermediate_size,
        "num_layers": config.num_layers, "num_decoder_layers": config.num_decoder_layers,
        "num_heads": config.num_heads,
        "relative_attention_num_buckets": config.relative_buckets,
        "relative_attention_max_distance": config.relative_max_distance,
        "dropout_rate": config.dropout_rate, "layer_norm_epsilon": config.layer_norm_eps,
        "feed_forward_proj": projection, "tie_word_embeddings": config.tie_word_embeddings,
        "scale_decoder_outputs": config.scales_decoder_outputs,
        "initializer_factor": config.initializer_factor, "pad_token_id": config.pad_token_id,
        "eos_token_id": config.eos_token_id,
        "decoder_start_token_id": config.decoder_start_token_id, "is_encoder_decoder": True,
    }

  def make_module(self, architecture: str, config: t5.T5Config):
    return {"T5ForConditionalGeneration": t5.T5ForConditionalGeneration,
            "T5Model": t5.T5Model}[architecture](config)

  def rules(self, architecture: str, config: t5.T5Config) -> list[Rule]:
    ours = "transformer/" if architecture == "T5ForConditionalGeneration" else ""
    rules = [Rule("shared.weight", f"{ours}shared/embedding"),
             *stack_rules("encoder", f"{ours}encoder", config.gated),
             *stack_rules("decoder", f"{ours}decoder", config.gated)]
    if architecture == "T5ForConditionalGeneration" and not config.tie_word_embeddings:
      rules.append(Rule("lm_head.weight", "lm_head/kernel", "linear"))
    return rules
