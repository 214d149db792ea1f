"""T5 (Raffel et al., 2020): the text-to-text encoder-decoder, v1.0 and v1.1.

Pre-norm residual blocks with RMSNorm (no mean, no bias), dense layers without biases,
unscaled dot-product attention (the 1/sqrt(d) lives in the initialization) plus a
bucketed relative position bias computed once per stack and shared by its layers
(bidirectional in the encoder, causal in the decoder). One embedding table is shared by
encoder and decoder inputs.

v1.0: ReLU feed-forward, output projection tied to the embedding with the decoder
output scaled by d_model^-0.5 first. v1.1: gated-GELU feed-forward, untied output
projection and no scaling, no dropout in pretraining.
"""
import dataclasses
from typing import Optional

import flax.linen as nn
import jax
import jax.numpy as jnp

from bertjax.layers import attention, dense, embeddings, ffn, kv_cache, norms, transformer
from bertjax.models.t5 import relative as t5_relative
from bertjax.models.common import encoder_decoder


@dataclasses.dataclass(frozen=True)
class T5Config:
  vocab_size: int = 32128
  hidden_size: int = 512          # d_model
  head_dim: int = 64              # d_kv; heads * head_dim need not equal hidden_size
  intermediate_size: int = 2048   # d_ff
  num_layers: int = 6
  num_decoder_layers: int = 6
  num_heads: int = 8
  relative_buckets: int = 32
  relative_max_distance: int = 128
  hidden_dropout: float = 0.1     # dropout_rate: every sublayer's, attention weights too
  layer_norm_eps: float = 1e-6
  hidden_act: str = "relu"
  gated: bool = False             # v1.1: gated-GELU
  tie_word_embeddings: bool = True
  # Scale the decoder output by hidden_size^-0.5 before the vocabulary projection
  # (v1.0, whose projection is the embedding); None follows tie_word_embeddings.
  scale_decoder_outputs: Optional[bool] = None
  initializer_factor: float = 1.0  # multiplies each layer's init scale (not a std)
  pad_token_id: int = 0
  eos_token_id: int = 1
  decoder_start_token_id: int = 0
  dtype: str = "float32"
  remat: bool = False
  scan_unroll: int = 0  # layers per loop iteration; 0: by backend (layers_per_iteration)

  @property
  def scales_decoder_outputs(self) -> bool:
    if self.scale_decoder_outputs is None:
      return self.tie_word_embeddings
    return self.scale_decoder_outputs

  def replace(self, **changes) -> "T5Config":
    return dataclasses.replace(self, **changes)


def _v1_0(hidden: int, ff: int, layers: int, heads: int, **overrides) -> T5Config:
  values = dict(hidden_size=hidden, intermediate_size=ff, num_layers=layers,
                num_decoder_layers=layers, num_heads=heads, head_dim=64)
  return T5Config(**{**values, **overrides})


def _v1_1(hidden: int, ff: int, layers: int, heads: int, **overrides) -> T5Config:
  values = dict(hidden_size=hidden, intermediate_size=ff, num_layers=layers,
                num_decoder_layers=layers, num_heads=heads, head_dim=64, hidden_act="gelu_new",
                gated=True, tie_word_embeddings=False, hidden_dropout=0.0)
  return T5Config(**{**values, **overrides})


def t5_small(**overrides) -> T5Config:
  return _v1_0(512, 2048, 6, 8, **overrides)


def t5_base(**overrides) -> T5Config:
  return _v1_0(768, 3072, 12, 12, **overrides)


def t5_large(**overrides) -> T5Config:
  return _v1_0(1024, 4096, 24, 16, **overrides)


def t5_v1_1_small(**overrides) -> T5Config:
  return _v1_1(512, 1024, 8, 6, **overrides)


def t5_v1_1_base(**overrides) -> T5Config:
  return _v1_1(768, 2048, 12, 12, **overrides)


def t5_v1_1_large(**overrides) -> T5Config:
  return _v1_1(1024, 2816, 24, 16, **overrides)


def t5_v1_1_xl(**overrides) -> T5Config:
  return _v1_1(2048, 5120, 24, 32, **overrides)


def t5_v1_1_xxl(**overrides) -> T5Config:
  return _v1_1(4096, 10240, 24, 64, **overrides)


SIZES = {"small": t5_small, "base": t5_base, "large": t5_large,
         "v1_1_small": t5_v1_1_small, "v1_1_base": t5_v1_1_base, "v1_1_large": t5_v1_1_large,
         "v1_1_xl": t5_v1_1_xl, "v1_1_xxl": t5_v1_1_xxl}


def _attention(cfg: T5Config, name: str, decode: bool = False,
               cache_cross_kv: bool = False) -> attention.MultiHeadAttention:
  return attention.MultiHeadAttention(
      cfg.num_heads, cfg.head_dim, cfg.hidden_dropout, use_bias=False, scale_logits=False,
      init_std=cfg.initializer_factor * cfg.hidden_size ** -0.5, dtype=jnp.dtype(cfg.dtype),
      decode=decode, cache_cross_kv=cache_cross_kv, name=name)


def _mlp(cfg: T5Config) -> ffn.MlpBlock:
  return ffn.MlpBlock(cfg.intermediate_size, cfg.hidden_act, cfg.hidden_dropout, use_bias=False,
                      init_std=cfg.initializer_factor * cfg.hidden_size ** -0.5,
                      dtype=jnp.dtype(cfg.dtype), intermediate_dropout=True, gated=cfg.gated,
                      name="mlp")


def _norm(cfg: T5Config, name: str) -> norms.RMSNorm:
  return norms.RMSNorm(cfg.layer_norm_eps, jnp.dtype(cfg.dtype), name=name)


class T5EncoderLayer(nn.Module):
  """Pre-norm self-attention + feed-forward; a scan body `(x, mask, bias) -> (x, x|None)`."""
  config: T5Config
  deterministic: bool = True
  emit_hidden_state: bool = False

  @nn.compact
  def __call__(self, x, mask, bias):
    cfg, det = self.config, self.deterministic
    drop = nn.Dropout(cfg.hidden_dropout)
    h = _attention(cfg, "self_attention")(_norm(cfg, "self_attention_norm")(x), mask=mask,
                                          bias=bias, deterministic=det)
    x = x + drop(h, deterministic=det)
    x = x + _mlp(cfg)(_norm(cfg, "mlp_norm")(x), deterministic=det)
    x = nn.with_logical_constraint(x, ("batch", "length", "embed"))
    return x, (x if self.emit_hidden_state else None)


class T5DecoderLayer(nn.Module):
  """Pre-norm causal self-attention, cross-attention and feed-forward (a scan body)."""
  config: T5Config
  deterministic: bool = True
  decode: bool = False
  emit_hidden_state: bool = False

  @nn.compact
  def __call__(self, x, mask, bias, encoded, cross_mask):
    cfg, det = self.config, self.deterministic
    drop = nn.Dropout(cfg.hidden_dropout)
    h = _attention(cfg, "self_attention", self.decode)(
        _norm(cfg, "self_attention_norm")(x), mask=mask, bias=bias, deterministic=det)
    x = x + drop(h, deterministic=det)
    h = _attention(cfg, "cross_attention", cache_cross_kv=self.decode)(
        _norm(cfg, "cross_attention_norm")(x), encoded, mask=cross_mask, deterministic=det)
    x = x + drop(h, deterministic=det)
    x = x + _mlp(cfg)(_norm(cfg, "mlp_norm")(x), deterministic=det)
    x = nn.with_logical_constraint(x, ("batch", "length", "embed"))
    return x, (x if self.emit_hidden_state else None)


class T5Stack(nn.Module):
  """Embedded inputs -> dropout -> scanned layers -> final RMSNorm -> dropout.

  The relative position bias is computed here once and broadcast to every layer.
  """
  config: T5Config
  is_decoder: bool = False

  @nn.compact
  def __call__(self, x, mask, encoded=None, cross_mask=None, *, deterministic: bool = True,
               decode: bool = False, output_hidden_states: bool = False):
    cfg = self.config
    drop = nn.Dropout(cfg.hidden_dropout)
    x = drop(x, deterministic=deterministic)
    relpos = t5_relative.RelativePositionBias(
        cfg.num_heads, cfg.relative_buckets, cfg.relative_max_distance,
        bidirectional=not self.is_decoder, init_std=cfg.initializer_factor * cfg.hidden_size ** -0.5,
        dtype=jnp.dtype(cfg.dtype), name="relative_bias")
    length = x.shape[1]
    if decode:  # the new tokens against every cache slot (bertjax.layers.kv_cache)
      start, cache_length = kv_cache.step_positions(self, length)
      bias = relpos(length, cache_length, start)
    else:
      bias = relpos(length, length)
    layer_cls = T5DecoderLayer if self.is_decoder else T5EncoderLayer
    if cfg.remat:
      layer_cls = nn.remat(layer_cls, prevent_cse=False)
    num_layers = cfg.num_decoder_layers if self.is_decoder else cfg.num_layers
    extra = dict(decode=decode) if self.is_decoder else {}
    args = (x, mask, bias, encoded, cross_mask) if self.is_decoder else (x, mask, bias)
    axes = {"params": 0, "cache": 0, kv_cache.CROSS_COLLECTION: 0,
            **attention.ANALYSIS_AXES}
    stacked = nn.scan(layer_cls, variable_axes=axes,
                      split_rngs={"params": True, "dropout": True},
                      in_axes=(nn.broadcast,) * (len(args) - 1), length=num_layers,
                      unroll=transformer.layers_per_iteration(cfg.scan_unroll, num_layers),
                      metadata_params={nn.PARTITION_NAME: "layers"})
    out, per_layer = stacked(cfg, deterministic, emit_hidden_state=output_hidden_states,
                             name="layers", **extra)(*args)
    out = drop(_norm(cfg, "final_norm")(out), deterministic=deterministic)
    hidden = None
    if output_hidden_states:  # the reference's last entry is after the final norm
      hidden = jnp.concatenate([x[None], per_layer[:-1], out[None]], axis=0)
    return out, hidden


class T5Model(nn.Module):
  """Shared embedding, encoder and decoder: `last_hidden_state` (decoder) and
  `encoder_last_hidden_state`, like the reference's T5Model.

  `encode` and `decode` are exposed separately (module.apply(..., method="encode")) so
  generation runs the encoder once and the decoder one token at a time.
  """
  config: T5Config

  def setup(self):
    cfg = self.config
    self.shared = embeddings.Embed(cfg.vocab_size, cfg.hidden_size, ("vocab", "embed"),
                                   cfg.initializer_factor, jnp.dtype(cfg.dtype))
    self.encoder = T5Stack(cfg, is_decoder=False)
    self.decoder = T5Stack(cfg, is_decoder=True)

  def encode(self, input_ids, attention_mask=None, encoder_segment_ids=None, *,
             deterministic: bool = True, output_hidden_states: bool = False) -> dict:
    mask = attention.encoder_mask(attention_mask, encoder_segment_ids)
    out, hidden = self.encoder(self.shared(input_ids), mask, deterministic=deterministic,
                               output_hidden_states=output_hidden_states)
    return {"encoder_last_hidden_state": out, "encoder_hidden_states": hidden}

  def decode(self, decoder_input_ids, encoder_hidden_states, attention_mask=None,
             decoder_attention_mask=None, encoder_segment_ids=None, decoder_segment_ids=None, *,
             deterministic: bool = True, decode: bool = False,
             output_hidden_states: bool = False) -> dict:
    self_mask, cross_mask = encoder_decoder.decoder_masks(
        decoder_input_ids.shape[1], attention_mask, decoder_attention_mask,
        encoder_segment_ids, decoder_segment_ids, decode=decode)
    out, hidden = self.decoder(self.shared(decoder_input_ids), self_mask, encoder_hidden_states,
                               cross_mask, deterministic=deterministic, decode=decode,
                               output_hidden_states=output_hidden_states)
    return {"last_hidden_state": out, "decoder_hidden_states": hidden}

  def __call__(self, input_ids, decoder_input_ids, attention_mask=None,
               decoder_attention_mask=None, encoder_segment_ids=None, decoder_segment_ids=None,
               encoder_position_ids=None, decoder_position_ids=None, *,
               deterministic: bool = True, output_hidden_states: bool = False) -> dict:
    # Relative positions come from token offsets; packed position ids are not needed.
    del encoder_position_ids, decoder_position_ids
    enc = self.encode(input_ids, attention_mask, encoder_segment_ids,
                      deterministic=deterministic, output_hidden_states=output_hidden_states)
    dec = self.decode(decoder_input_ids, enc["encoder_last_hidden_state"], attention_mask,
                      decoder_attention_mask, encoder_segment_ids, decoder_segment_ids,
                      deterministic=deterministic, output_hidden_states=output_hidden_states)
    return {**enc, **dec}


class T5ForConditionalGeneration(encoder_decoder.WithLogits):
  """T5Model plus the vocabulary projection: `logits` [B, T, vocab]."""
  config: T5Config

  def setup(self):
    cfg = self.config
    self.transformer = T5Model(cfg)
    if not cfg.tie_word_embeddings:
      self.lm_head = dense.DenseGeneral(cfg.vocab_size, ("embed", "vocab"), use_bias=False,
                                        init_std=cfg.initializer_factor, dtype=jnp.dtype(cfg.dtype))

  def logits(self, hidden: jax.Array) -> jax.Array:
    cfg = self.config
    if cfg.scales_decoder_outputs:
      hidden = hidden * cfg.hidden_size ** -0.5
    if cfg.tie_word_embeddings:
      logits = self.transformer.shared.attend(hidden)
    else:
      logits = self.lm_head(hidden)
    return nn.with_logical_constraint(logits, ("batch", "length", "vocab"))

  @property
  def wrapped(self) -> nn.Module:
    return self.transformer
