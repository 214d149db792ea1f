"""BERT (Devlin et al., 2019): encoder, pooler, and the MLM / NSP pretraining heads.

Sizes follow Google's released checkpoints, including the "BERT miniatures"
(Turc et al., 2019) for tiny / mini / small / medium.
"""
import dataclasses
from typing import Any, Optional

import flax.linen as nn
import jax
import jax.numpy as jnp

from bertjax.layers import activations, attention, dense, embeddings, norms, transformer
from bertjax.layers.long_attention import kinds as attention_types  # noqa: F401  (registers the gin `attention`)
from bertjax.models.common import positions
from bertjax.models.common.config import EncoderConfig


@dataclasses.dataclass(frozen=True)
class BertConfig(EncoderConfig):
  """EncoderConfig's fields and defaults (BERT-base), plus the choice of self-attention."""
  # Long-sequence self-attention: a spec from bertjax.layers.long_attention.kinds.attention
  # (BigBird, Longformer, Linformer); None = dense attention.
  attention: Any = None
  ENCODER_VARIANTS = True  # rotary positions and pre-LN (models.common.config)

  def __post_init__(self):
    super().__post_init__()
    if positions.is_rotary(self) and self.attention is not None:
      raise ValueError(f"{type(self).__name__}: rotary positions need dense attention "
                       f"(attention=None), not {type(self.attention).__name__}.")


def _size(layers: int, hidden: int, **overrides) -> BertConfig:
  return BertConfig(hidden_size=hidden, num_layers=layers, num_heads=hidden // 64,
                    intermediate_size=4 * hidden, **overrides)


def bert_tiny(**overrides) -> BertConfig:
  return _size(2, 128, **overrides)


def bert_mini(**overrides) -> BertConfig:
  return _size(4, 256, **overrides)


def bert_small(**overrides) -> BertConfig:
  return _size(4, 512, **overrides)


def bert_medium(**overrides) -> BertConfig:
  return _size(8, 512, **overrides)


def bert_base(**overrides) -> BertConfig:
  return _size(12, 768, **overrides)


def bert_large(**overrides) -> BertConfig:
  return _size(24, 1024, **overrides)


SIZES = {"tiny": bert_tiny, "mini": bert_mini, "small": bert_small,
         "medium": bert_medium, "base": bert_base, "large": bert_large}


def _dense(features: int, axes: tuple, init_std: float, dtype, name: str) -> dense.DenseGeneral:
  return dense.DenseGeneral(features, axes, init_std=init_std, dtype=dtype, name=name)


class BertModel(nn.Module):
  """Embeddings -> Transformer stack -> (optional) tanh pooler over [CLS]."""
  config: BertConfig
  add_pooling_layer: bool = True

  def setup(self):
    cfg = self.config
    dtype = jnp.dtype(cfg.dtype)
    self.embeddings = embeddings.TextEmbeddings(
        cfg.vocab_size, cfg.hidden_size, positions.table_size(cfg), cfg.type_vocab_size,
        cfg.layer_norm_eps, cfg.hidden_dropout, cfg.initializer_range, dtype)
    self.encoder = transformer.TransformerStack(
        cfg.num_layers, cfg.num_heads, cfg.head_dim, cfg.intermediate_size, cfg.hidden_act,
        cfg.hidden_dropout, cfg.attention_dropout, cfg.layer_norm_eps, pre_norm=cfg.pre_norm,
        init_std=cfg.initializer_range, dtype=dtype, remat=cfg.remat,
        scan_unroll=cfg.scan_unroll, attention_spec=cfg.attention,
        attention_implementation=cfg.attention_implementation,
        rotary_base=positions.rotary_base(cfg))
    if cfg.pre_norm:
      self.final_norm = norms.LayerNorm(cfg.layer_norm_eps, dtype)
    if self.add_pooling_layer:
      self.pooler = _dense(cfg.hidden_size, ("embed", "mlp"), cfg.initializer_range, dtype, "pooler")

  def __call__(self, input_ids, attention_mask=None, token_type_ids=None, position_ids=None,
               segment_ids=None, *, deterministic: bool = True,
               output_hidden_states: bool = False, global_attention_mask=None) -> dict:
    """global_attention_mask: [B, L] tokens with global attention (Longformer attention)."""
    x = self.embeddings(input_ids, position_ids, token_type_ids, deterministic=deterministic)
    if self.config.attention is None:
      mask = attention.encoder_mask(attention_mask, segment_ids)
    else:  # never an [L, L] mask: the spec's per-token TokenMask
      mask = self.config.attention.encoder_mask(attention_mask, segment_ids, global_attention_mask)
    out, per_layer = self.encoder(x, mask, deterministic=deterministic,
                                  output_hidden_states=output_hidden_states,
                                  **positions.stack_inputs(self.config, position_ids))
    if self.config.pre_norm:
      out = self.final_norm(out)
    result = {"last_hidden_state": out,
              "pooler_output": jnp.tanh(self.pooler(out[:, 0])) if self.add_pooling_layer else None}
    if output_hidden_states:
      result["hidden_states"] = jnp.concatenate([x[None], per_layer], axis=0)
    return result


def gather_positions(hidden: jax.Array, positions: Optional[jax.Array]) -> jax.Array:
  """hidden [B, L, H] at positions [B, P] -> [B, P, H]; all of `hidden` when positions is None."""
  if positions is None:
    return hidden
  return jnp.take_along_axis(hidden, positions[..., None].astype(jnp.int32), axis=1)


class MlmHead(nn.Module):
  """dense + activation + LayerNorm, then the word-embedding matrix (tied) + bias.

  With `masked_positions` [B, P] the head runs only there (BERT's max_predictions_per_seq):
  the vocabulary projection dominates a small model's FLOPs, and 85% of it is wasted
  on tokens that have no MLM target.
  """
  config: BertConfig

  @nn.compact
  def __call__(self, hidden: jax.Array, word_embeddings: embeddings.Embed,
               masked_positions: Optional[jax.Array] = None) -> jax.Array:
    cfg = self.config
    dtype = jnp.dtype(cfg.dtype)
    hidden = gather_positions(hidden, masked_positions)
    h = _dense(word_embeddings.features, ("embed", "mlp"), cfg.initializer_range, dtype,
               "transform")(hidden)
    h = activations.get_activation(cfg.hidden_act)(h)
    h = norms.LayerNorm(cfg.layer_norm_eps, dtype, name="transform_norm")(h)
    logits = word_embeddings.attend(h)
    bias = self.param("bias", nn.with_logical_partitioning(nn.initializers.zeros, ("vocab",)),
                      (word_embeddings.num_embeddings,), jnp.float32)
    logits = logits + bias.astype(logits.dtype)
    return nn.with_logical_constraint(logits, ("batch", "length", "vocab"))


class BertForPreTraining(nn.Module):
  """BERT with both pretraining heads: `prediction_logits` and `seq_relationship_logits`."""
  config: BertConfig

  def setup(self):
    self.bert = BertModel(self.config)
    self.mlm_head = MlmHead(self.config)
    self.nsp_head = _dense(2, ("embed", None), self.config.initializer_range,
                           jnp.dtype(self.config.dtype), "nsp_head")

  def __call__(self, input_ids, attention_mask=None, token_type_ids=None, position_ids=None,
               segment_ids=None, masked_positions=None, *, deterministic: bool = True,
               output_hidden_states: bool = False) -> dict:
    out = self.bert(input_ids, attention_mask, token_type_ids, position_ids, segment_ids,
                    deterministic=deterministic, output_hidden_states=output_hidden_states)
    out["prediction_logits"] = self.mlm_head(out["last_hidden_state"],
                                             self.bert.embeddings.word_embeddings, masked_positions)
    out["seq_relationship_logits"] = self.nsp_head(out["pooler_output"])
    return out


class BertForMaskedLM(nn.Module):
  """BERT without pooler, with the MLM head: `logits`."""
  config: BertConfig

  def setup(self):
    self.bert = BertModel(self.config, add_pooling_layer=False)
    self.mlm_head = MlmHead(self.config)

  def __call__(self, input_ids, attention_mask=None, token_type_ids=None, position_ids=None,
               segment_ids=None, masked_positions=None, *, deterministic: bool = True,
               output_hidden_states: bool = False) -> dict:
    out = self.bert(input_ids, attention_mask, token_type_ids, position_ids, segment_ids,
                    deterministic=deterministic, output_hidden_states=output_hidden_states)
    out["logits"] = self.mlm_head(out["last_hidden_state"], self.bert.embeddings.word_embeddings,
                                  masked_positions)
    return out


def init_params(module: nn.Module, rng: jax.Array, batch_size: int = 1, length: int = 8,
                boxed: bool = False):
  """Random parameters for any encoder-style module (called with input_ids only)."""
  ids = jnp.zeros((batch_size, length), jnp.int32)
  variables = module.init(rng, ids)
  return variables["params"] if boxed else nn.unbox(variables["params"])
