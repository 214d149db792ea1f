"""ModernBERT (Warner et al., 2024): a BERT-style encoder rebuilt with later LM practice.

What differs from BERT, all inside the modules here:
- no absolute positions and no token types: rotary positions (bertjax.layers.rotary) with
  one base for the global layers (160k) and another for the local ones (10k);
- pre-norm layers (the first has no attention norm: the embedding norm precedes it) and a
  final norm; no biases in projections or norms by default;
- a GeGLU feed-forward: GELU(x W) * (x V);
- every `global_attn_every_n_layers`-th layer (from the first) attends to the whole input,
  the others to a sliding window of `local_attention` tokens (each token sees the keys at
  most local_attention / 2 positions away), computed band by band so that the keys outside
  it cost nothing (bertjax.layers.sliding_window);
- the MLM head and the task heads share one layout: dense, activation, norm.

The layers are separate modules, not one `nn.scan` body: the first lacks a norm and the
others alternate window and rotary base, so no single body fits all of them (the published
stacks are 22 and 28 layers, unrolled as the GPU path unrolls every family's loop).
"""
import dataclasses

import flax.linen as nn
import jax
import jax.numpy as jnp

from bertjax.layers import activations, attention, dense, embeddings, ffn, norms, sliding_window
from bertjax.layers.long_attention import token_mask
from bertjax.models.bert.model import gather_positions
from bertjax.models.common.config import EncoderConfig

POOLINGS = ("cls", "mean")


@dataclasses.dataclass(frozen=True)
class ModernBertConfig(EncoderConfig):
  """EncoderConfig's fields with ModernBERT-base's defaults, plus its own.

  Renamed from transformers': `hidden_act` is its hidden_activation, `layer_norm_eps` its
  norm_eps, `hidden_dropout` its mlp_dropout (after the GeGLU product), `rotary_base` /
  `local_rotary_base` the global / local rope_theta. Rotary positions and pre-norm are this
  family's own architecture, not variants: the fields say so and may not be changed.
  """
  vocab_size: int = 50368
  hidden_size: int = 768
  num_layers: int = 22
  num_heads: int = 12
  intermediate_size: int = 1152
  hidden_dropout: float = 0.0
  attention_dropout: float = 0.0
  max_position_embeddings: int = 8192  # the trained context; rotary positions have no table
  type_vocab_size: int = 0
  layer_norm_eps: float = 1e-5
  pad_token_id: int = 50283
  position_embedding: str = "rotary"
  rotary_base: float = 160000.0
  pre_norm: bool = True
  classifier_dropout: float | None = 0.0
  local_rotary_base: float = 10000.0
  global_attn_every_n_layers: int = 3
  local_attention: int = 128  # the window's width: keys at most half of it away
  embedding_dropout: float = 0.0
  norm_bias: bool = False
  attention_bias: bool = False
  mlp_bias: bool = False
  decoder_bias: bool = True  # the MLM head's output bias
  classifier_bias: bool = False  # the dense layer of the MLM and task heads
  classifier_activation: str = "gelu"
  classifier_pooling: str = "cls"  # sequence classification and multiple choice: 'cls' | 'mean'
  # The tokenizer's [CLS] / [SEP] ids, carried to config.json (its bos / eos too).
  cls_token_id: int = 50281
  sep_token_id: int = 50282
  ENCODER_VARIANTS = True  # it builds rotary positions and pre-norm (always) ...
  EXPORTS_VARIANTS = True  # ... and transformers' ModernBert classes run them too

  def __post_init__(self):
    super().__post_init__()
    name = type(self).__name__
    if self.position_embedding != "rotary" or not self.pre_norm:
      raise ValueError(f"{name}: ModernBERT has rotary positions and pre-norm layers only; "
                       f"got position_embedding={self.position_embedding!r}, "
                       f"pre_norm={self.pre_norm}.")
    if self.local_rotary_base <= 0:
      raise ValueError(f"{name}: local_rotary_base={self.local_rotary_base} must be > 0.")
    if self.global_attn_every_n_layers < 1:
      raise ValueError(f"{name}: global_attn_every_n_layers={self.global_attn_every_n_layers}; "
                       "give 1 (every layer global) or more.")
    if self.local_attention < 2 or self.local_attention % 2:
      raise ValueError(f"{name}: local_attention={self.local_attention} must be an even window "
                       "width >= 2 (keys up to local_attention / 2 away on each side).")
    if self.type_vocab_size:
      raise ValueError(f"{name}: type_vocab_size={self.type_vocab_size}; ModernBERT has no "
                       "token types (0).")
    if self.classifier_pooling not in POOLINGS:
      raise ValueError(f"{name}: classifier_pooling={self.classifier_pooling!r}; use one of "
                       f"{POOLINGS}.")
    activations.get_activation(self.classifier_activation)

  def is_global(self, layer: int) -> bool:
    """Whether `layer` attends globally (else within the sliding window)."""
    return layer % self.global_attn_every_n_layers == 0

  @property
  def window_radius(self) -> int:
    """How far a local layer's query may look on each side (transformers' sliding_window)."""
    return self.local_attention // 2


def modernbert_tiny(**overrides) -> ModernBertConfig:
  """For tests and CPU runs: 4 layers (global, local, global, local), a 16-token window."""
  return ModernBertConfig(**{**dict(hidden_size=128, num_layers=4, num_heads=2,
                                    intermediate_size=192, global_attn_every_n_layers=2,
                                    local_attention=16), **overrides})


def modernbert_base(**overrides) -> ModernBertConfig:
  """answerdotai/ModernBERT-base: 22 layers of 768, 12 heads, GeGLU 1152 (149M)."""
  return ModernBertConfig(**overrides)


def modernbert_large(**overrides) -> ModernBertConfig:
  """answerdotai/ModernBERT-large: 28 layers of 1024, 16 heads, GeGLU 2624 (395M)."""
  return ModernBertConfig(**{**dict(hidden_size=1024, num_layers=28, num_heads=16,
                                    intermediate_size=2624), **overrides})


SIZES = {"tiny": modernbert_tiny, "base": modernbert_base, "large": modernbert_large}


def _norm(cfg: ModernBertConfig, name: str, dtype=None) -> norms.LayerNorm:
  return norms.LayerNorm(cfg.layer_norm_eps, jnp.dtype(dtype or cfg.dtype), cfg.norm_bias,
                         name=name)


class ModernBertEmbeddings(nn.Module):
  """Token embeddings, norm, dropout (no positions: they are rotary; no token types)."""
  config: ModernBertConfig

  def setup(self):
    cfg = self.config
    self.word_embeddings = embeddings.Embed(cfg.vocab_size, cfg.hidden_size, ("vocab", "embed"),
                                            cfg.initializer_range, jnp.dtype(cfg.dtype))
    self.norm = _norm(cfg, "norm")
    self.dropout = nn.Dropout(cfg.embedding_dropout)

  def __call__(self, input_ids, *, deterministic: bool = True) -> jax.Array:
    x = self.dropout(self.norm(self.word_embeddings(input_ids)), deterministic=deterministic)
    return nn.with_logical_constraint(x, ("batch", "length", "embed"))


class ModernBertLayer(nn.Module):
  """Pre-norm attention (global or windowed, by `index`) and GeGLU, each with a residual."""
  config: ModernBertConfig
  index: int

  @nn.compact
  def __call__(self, x: jax.Array, global_mask, local_mask, positions: jax.Array,
               deterministic: bool = True) -> jax.Array:
    cfg = self.config
    dtype = jnp.dtype(cfg.dtype)
    is_global = cfg.is_global(self.index)
    options = dict(init_std=cfg.initializer_range, dtype=dtype, name="attention",
                   implementation=cfg.attention_implementation)
    if is_global:
      attend = attention.MultiHeadAttention(cfg.num_heads, cfg.head_dim, cfg.attention_dropout,
                                            cfg.attention_bias, rotary_base=cfg.rotary_base,
                                            **options)
    else:
      attend = sliding_window.SlidingWindowAttention(
          cfg.num_heads, cfg.head_dim, cfg.attention_dropout, cfg.attention_bias,
          rotary_base=cfg.local_rotary_base, radius=cfg.window_radius, **options)
    # The first layer reads the embedding norm's output directly.
    h = x if self.index == 0 else _norm(cfg, "attention_norm")(x)
    h = attend(h, mask=global_mask if is_global else local_mask, positions=positions,
               deterministic=deterministic)
    x = x + nn.Dropout(cfg.attention_dropout)(h, deterministic=deterministic)
    mlp = ffn.MlpBlock(cfg.intermediate_size, cfg.hidden_act, 0.0, cfg.mlp_bias,
                       cfg.initializer_range, dtype, intermediate_dropout=True, gated=True,
                       intermediate_dropout_rate=cfg.hidden_dropout, name="mlp")
    x = x + mlp(_norm(cfg, "mlp_norm")(x), deterministic=deterministic)
    return nn.with_logical_constraint(x, ("batch", "length", "embed"))


class ModernBertModel(nn.Module):
  """Embeddings -> layers -> final norm; `pooler_output` is None (ModernBERT has no pooler).

  token_type_ids are accepted for the encoder interface and ignored (no token types).
  position_ids [B, L] rotate queries and keys (default 0..L-1; a packed row restarts them
  per example, with segment_ids keeping the examples apart).
  """
  config: ModernBertConfig

  def setup(self):
    cfg = self.config
    self.embeddings = ModernBertEmbeddings(cfg)
    layer_cls = nn.remat(ModernBertLayer, static_argnums=(5,)) if cfg.remat else ModernBertLayer
    self.layers = [layer_cls(cfg, i, name=f"layers_{i}") for i in range(cfg.num_layers)]
    self.final_norm = _norm(cfg, "final_norm")

  def __call__(self, input_ids, attention_mask=None, token_type_ids=None, position_ids=None,
               segment_ids=None, *, deterministic: bool = True,
               output_hidden_states: bool = False) -> dict:
    del token_type_ids
    length = input_ids.shape[-1]
    if position_ids is None:
      position_ids = jnp.broadcast_to(jnp.arange(length), input_ids.shape)
    global_mask = attention.encoder_mask(attention_mask, segment_ids)
    local_mask = token_mask.from_features(attention_mask, segment_ids)  # per token: no [L, L]
    x = self.embeddings(input_ids, deterministic=deterministic)
    states = [x]
    for layer in self.layers:
      x = layer(x, global_mask, local_mask, position_ids, deterministic)
      states.append(x)
    out = self.final_norm(x)
    result = {"last_hidden_state": out, "pooler_output": None}
    if output_hidden_states:  # as transformers': the last one after the final norm
      result["hidden_states"] = jnp.stack(states[:-1] + [out])
    return result


def prediction_transform(cfg: ModernBertConfig, x: jax.Array, dtype) -> jax.Array:
  """dense -> activation -> norm (transformers' ModernBertPredictionHead): the MLM head's
  transform and every task head's first half. Called inside a compact method, so its
  `dense` and `norm` belong to the calling head."""
  h = dense.DenseGeneral(cfg.hidden_size, ("embed", "mlp"), use_bias=cfg.classifier_bias,
                         init_std=cfg.initializer_range, dtype=dtype, name="dense")(x)
  h = activations.get_activation(cfg.classifier_activation)(h)
  return _norm(cfg, "norm", dtype)(h)


class MlmHead(nn.Module):
  """prediction_transform, then the word-embedding matrix (tied) + bias (`decoder_bias`); with
  `masked_positions` [B, P] only there, as BERT's head."""
  config: ModernBertConfig

  @nn.compact
  def __call__(self, hidden: jax.Array, word_embeddings: embeddings.Embed,
               masked_positions=None) -> jax.Array:
    h = prediction_transform(self.config, gather_positions(hidden, masked_positions),
                             jnp.dtype(self.config.dtype))
    logits = word_embeddings.attend(h)
    if self.config.decoder_bias:
      bias = self.param("bias", nn.with_logical_partitioning(nn.initializers.zeros, ("vocab",)),
                        (word_embeddings.num_embeddings,), jnp.float32)
      logits = logits + bias.astype(logits.dtype)
    return nn.with_logical_constraint(logits, ("batch", "length", "vocab"))


class ModernBertForMaskedLM(nn.Module):
  """ModernBertModel + MlmHead: `logits`."""
  config: ModernBertConfig

  def setup(self):
    self.model = ModernBertModel(self.config)
    self.mlm_head = MlmHead(self.config)

  def __call__(self, input_ids, attention_mask=None, token_type_ids=None, position_ids=None,
               segment_ids=None, masked_positions=None, *, deterministic: bool = True,
               output_hidden_states: bool = False) -> dict:
    out = self.model(input_ids, attention_mask, token_type_ids, position_ids, segment_ids,
                     deterministic=deterministic, output_hidden_states=output_hidden_states)
    out["logits"] = self.mlm_head(out["last_hidden_state"], self.model.embeddings.word_embeddings,
                                  masked_positions)
    return out
