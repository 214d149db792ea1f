"""BART <-> transformers' BartModel / BartForConditionalGeneration."""
from typing import Any, Mapping

from bertjax.hf.config_map import ConfigMap, Field, same
from bertjax.hf.mapping import Rule, embedding, layer_norm, linear, qkv_projections
from bertjax.hf.seq2seq import Seq2SeqFamily
from bertjax.models import bart


def _first_id(ids):
  """eos_token_id: transformers accepts a list; the first is the one generation ends on."""
  return ids[0] if isinstance(ids, list) else ids


def _forced_id(ids):
  if isinstance(ids, list):
    if len(ids) != 1:
      raise ValueError(f"config.json: forced_eos_token_id={ids}; bertjax forces one token at "
                       "the length limit. Give a single id (or null to force none).")
    return ids[0]
  return ids


_POST_NORM = "the reference BART is post-norm; pre-norm (mBART-style) configs are not supported"
CONFIG_MAP = ConfigMap(
    "BART",
    (*same("vocab_size"), Field("d_model", "hidden_size"),
     *same("encoder_layers", "decoder_layers"),
     Field("encoder_attention_heads", "encoder_heads"),
     Field("decoder_attention_heads", "decoder_heads"),
     Field("encoder_ffn_dim", "encoder_ffn_size"), Field("decoder_ffn_dim", "decoder_ffn_size"),
     Field("activation_function", "hidden_act"), Field("dropout", "hidden_dropout"),
     *same("attention_dropout", "activation_dropout", "max_position_embeddings"),
     Field("init_std", "initializer_range"),
     *same("scale_embedding", "pad_token_id", "bos_token_id"),
     Field("eos_token_id", "eos_token_id", from_hf=_first_id),
     *same("decoder_start_token_id", "forced_bos_token_id"),
     Field("forced_eos_token_id", "forced_eos_token_id", from_hf=_forced_id),
     Field("num_hidden_layers", "encoder_layers", read=False)),
    constants={"tie_word_embeddings": True},
    checked={"normalize_before": False, "add_final_layer_norm": False},
    hf_only={"is_encoder_decoder": True},
    reasons={"tie_word_embeddings": "its output projection is the shared token embedding",
             "normalize_before": _POST_NORM, "add_final_layer_norm": _POST_NORM},
    labels=False)
# Keys whose explicit null means "none" (not "the default"), as in transformers' generate.
_NULLABLE = ("forced_bos_token_id", "forced_eos_token_id")
_ATTENTION = {"q_proj": "query", "k_proj": "key", "v_proj": "value"}


def _attention(hf: str, ours: str) -> list[Rule]:
  return (qkv_projections(f"{hf}.", f"{ours}/", _ATTENTION)
          + linear(f"{hf}.out_proj", f"{ours}/out", 2))


def stack_rules(hf: str, ours: str, is_decoder: bool) -> list[Rule]:
  """One BartStack; `hf` is e.g. 'model.encoder', `ours` e.g. 'model/encoder'."""
  layer, layers = f"{hf}.layers.{{layer}}", f"{ours}/layers"
  rules = [
      embedding(f"{hf}.embed_positions", f"{ours}/position_embeddings"),
      *layer_norm(f"{hf}.layernorm_embedding", f"{ours}/embedding_norm"),
      *_attention(f"{layer}.self_attn", f"{layers}/self_attention"),
      *layer_norm(f"{layer}.self_attn_layer_norm", f"{layers}/self_attention_norm"),
      *linear(f"{layer}.fc1", f"{layers}/mlp/intermediate"),
      *linear(f"{layer}.fc2", f"{layers}/mlp/output"),
      *layer_norm(f"{layer}.final_layer_norm", f"{layers}/mlp_norm"),
  ]
  if is_decoder:
    rules += [*_attention(f"{layer}.encoder_attn", f"{layers}/cross_attention"),
              *layer_norm(f"{layer}.encoder_attn_layer_norm", f"{layers}/cross_attention_norm")]
  return rules


class BartFamily(Seq2SeqFamily):
  name = "bart"
  config_class = bart.BartConfig
  config_map = CONFIG_MAP
  model_types = ("bart",)
  architectures = {
      "BartForConditionalGeneration": ("logits", "encoder_last_hidden_state"),
      "BartModel": ("last_hidden_state", "encoder_last_hidden_state"),
  }
  # Per-stack embed_tokens and the tied lm_head are the shared table.
  ignored_keys = (r"(model\.)?(encoder|decoder)\.embed_tokens\.weight", r"lm_head\.weight")
  modules = {"BartForConditionalGeneration": bart.BartForConditionalGeneration,
             "BartModel": bart.BartModel}

  # A null means transformers' default, except where it means "none" (_NULLABLE).
  def config_from_hf(self, hf: Mapping[str, Any]) -> bart.BartConfig:
    return super().config_from_hf({k: v for k, v in hf.items()
                                   if v is not None or k in _NULLABLE})

  def model_rules(self, architecture: str, config: bart.BartConfig) -> list[Rule]:
    generation = architecture == "BartForConditionalGeneration"
    hf, ours = ("model.", "model/") if generation else ("", "")
    rules = [embedding(f"{hf}shared", f"{ours}shared"),
             *stack_rules(f"{hf}encoder", f"{ours}encoder", False),
             *stack_rules(f"{hf}decoder", f"{ours}decoder", True)]
    if generation:
      rules.append(Rule("final_logits_bias", "final_logits_bias"))
    return rules
