"""BART <-> transformers' BartModel / BartForConditionalGeneration."""
from typing import Any, Mapping

from bertjax.hf.mapping import Rule
from bertjax.hf.seq2seq import Seq2SeqFamily
from bertjax.models import bart

# config.json key -> BartConfig field.
_RENAMED = {
    "vocab_size": "vocab_size", "d_model": "hidden_size", "encoder_layers": "encoder_layers",
    "decoder_layers": "decoder_layers", "encoder_attention_heads": "encoder_heads",
    "decoder_attention_heads": "decoder_heads", "encoder_ffn_dim": "encoder_ffn_size",
    "decoder_ffn_dim": "decoder_ffn_size", "activation_function": "activation",
    "dropout": "dropout", "attention_dropout": "attention_dropout",
    "activation_dropout": "activation_dropout",
    "max_position_embeddings": "max_position_embeddings", "init_std": "init_std",
    "scale_embedding": "scale_embedding", "pad_token_id": "pad_token_id",
    "bos_token_id": "bos_token_id", "eos_token_id": "eos_token_id",
    "decoder_start_token_id": "decoder_start_token_id",
    "forced_bos_token_id": "forced_bos_token_id", "forced_eos_token_id": "forced_eos_token_id",
}
# Keys whose explicit null means "none" (not "the default"), as in transformers' generate.
_NULLABLE = ("forced_bos_token_id", "forced_eos_token_id")
_ATTENTION = {"q_proj": "query", "k_proj": "key", "v_proj": "value"}


def _linear(hf: str, ours: str, in_dims: int = 1, bias_kind: str = "copy") -> list[Rule]:
  return [Rule(f"{hf}.weight", f"{ours}/kernel", "linear", in_dims),
          Rule(f"{hf}.bias", f"{ours}/bias", bias_kind)]


def _norm(hf: str, ours: str) -> list[Rule]:
  return [Rule(f"{hf}.weight", f"{ours}/scale"), Rule(f"{hf}.bias", f"{ours}/bias")]


def _attention(hf: str, ours: str) -> list[Rule]:
  rules = [r for a, b in _ATTENTION.items() for r in _linear(f"{hf}.{a}", f"{ours}/{b}", 1, "bias")]
  return rules + _linear(f"{hf}.out_proj", f"{ours}/out", 2)


def stack_rules(hf: str, ours: str, is_decoder: bool) -> list[Rule]:
  """One BartStack; `hf` is e.g. 'model.encoder', `ours` e.g. 'model/encoder'."""
  layer, layers = f"{hf}.layers.{{layer}}", f"{ours}/layers"
  rules = [
      Rule(f"{hf}.embed_positions.weight", f"{ours}/position_embeddings/embedding"),
      *_norm(f"{hf}.layernorm_embedding", f"{ours}/embedding_norm"),
      *_attention(f"{layer}.self_attn", f"{layers}/self_attention"),
      *_norm(f"{layer}.self_attn_layer_norm", f"{layers}/self_attention_norm"),
      *_linear(f"{layer}.fc1", f"{layers}/mlp/intermediate"),
      *_linear(f"{layer}.fc2", f"{layers}/mlp/output"),
      *_norm(f"{layer}.final_layer_norm", f"{layers}/mlp_norm"),
  ]
  if is_decoder:
    rules += [*_attention(f"{layer}.encoder_attn", f"{layers}/cross_attention"),
              *_norm(f"{layer}.encoder_attn_layer_norm", f"{layers}/cross_attention_norm")]
  return rules


class BartFamily(Seq2SeqFamily):
  name = "bart"
  config_class = bart.BartConfig
  model_types = ("bart",)
  architectures = {
      "BartForConditionalGeneration": ("logits", "encoder_last_hidden_state"),
      "BartModel": ("last_hidden_state", "encoder_last_hidden_state"),
  }
  # Per-stack embed_tokens and the tied lm_head are the shared table.
  ignored_keys = (r"(model\.)?(encoder|decoder)\.embed_tokens\.weight", r"lm_head\.weight")

  def config_from_hf(self, hf: Mapping[str, Any]) -> bart.BartConfig:
    if hf.get("tie_word_embeddings", True) is False:
      raise ValueError("tie_word_embeddings=false is not supported for BART: its output "
                       "projection is the shared token embedding.")
    if hf.get("normalize_before") or hf.get("add_final_layer_norm"):
      raise ValueError("Pre-norm (mBART-style) BART configs are not supported; the reference "
                       "BART is post-norm.")
    values = {_RENAMED[k]: v for k, v in hf.items()
              if k in _RENAMED and (v is not None or k in _NULLABLE)}
    if isinstance(values.get("eos_token_id"), list):
      values["eos_token_id"] = values["eos_token_id"][0]
    forced = values.get("forced_eos_token_id")
    if isinstance(forced, list):
      if len(forced) != 1:
        raise ValueError(f"config.json: forced_eos_token_id={forced}; bertjax forces one token "
                         "at the length limit. Give a single id (or null to force none).")
      values["forced_eos_token_id"] = forced[0]
    return bart.BartConfig(**values)

  def config_to_hf(self, config: bart.BartConfig, architecture: str) -> dict:
    out = {hf: getattr(config, ours) for hf, ours in _RENAMED.items()}
    out.update(model_type="bart", architectures=[architecture], is_encoder_decoder=True,
               tie_word_embeddings=True, num_hidden_layers=config.encoder_layers)
    return out

  def make_module(self, architecture: str, config: bart.BartConfig):
    return {"BartForConditionalGeneration": bart.BartForConditionalGeneration,
            "BartModel": bart.BartModel}[architecture](config)

  def rules(self, architecture: str, config: bart.BartConfig) -> list[Rule]:
    generation = architecture == "BartForConditionalGeneration"
    hf, ours = ("model.", "model/") if generation else ("", "")
    rules = [Rule(f"{hf}shared.weight", f"{ours}shared/embedding"),
             *stack_rules(f"{hf}encoder", f"{ours}encoder", False),
             *stack_rules(f"{hf}decoder", f"{ours}decoder", True)]
    if generation:
      rules.append(Rule("final_logits_bias", "final_logits_bias"))
    return rules
