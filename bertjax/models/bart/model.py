"""BART (Lewis et al., 2020): a denoising autoencoder with a bidirectional encoder and
an autoregressive decoder.

Post-norm residual blocks (LayerNorm eps 1e-5, as torch's default), GELU, learned
absolute positions whose table is offset by 2 (fairseq reserved the first rows for
padding), and a LayerNorm on the embeddings (`layernorm_embedding`). One token table
is shared by encoder, decoder and (tied) output projection, which adds a fixed
`final_logits_bias`.
"""
import dataclasses
import math
from typing import Optional

import flax.linen as nn
import jax
import jax.numpy as jnp

from bertjax.layers import activations, attention, embeddings, ffn, kv_cache, norms, transformer
from bertjax.models.common import encoder_decoder

POSITION_OFFSET = 2


@dataclasses.dataclass(frozen=True)
class BartConfig:
  vocab_size: int = 50265
  hidden_size: int = 1024             # d_model
  encoder_layers: int = 12
  decoder_layers: int = 12
  encoder_heads: int = 16
  decoder_heads: int = 16
  encoder_ffn_size: int = 4096
  decoder_ffn_size: int = 4096
  hidden_act: str = "gelu"
  hidden_dropout: float = 0.1        # transformers' dropout
  attention_dropout: float = 0.0
  activation_dropout: float = 0.0
  max_position_embeddings: int = 1024
  layer_norm_eps: float = 1e-5
  initializer_range: float = 0.02
  scale_embedding: bool = False       # multiply token embeddings by sqrt(d_model)
  pad_token_id: int = 1
  bos_token_id: int = 0
  eos_token_id: int = 2
  decoder_start_token_id: int = 2
  # Generation: the token forced first / at the length limit; None forces nothing. As in
  # transformers, a config.json without the key forces EOS (2) and an explicit null does not.
  forced_bos_token_id: Optional[int] = None
  forced_eos_token_id: Optional[int] = 2
  dtype: str = "float32"
  remat: bool = False
  scan_unroll: int = 0  # layers per loop iteration; 0: by backend (layers_per_iteration)

  def __post_init__(self):
    for side, heads in (("encoder", self.encoder_heads), ("decoder", self.decoder_heads)):
      if self.hidden_size % heads:
        raise ValueError(f"hidden_size={self.hidden_size} is not a multiple of "
                         f"{side}_heads={heads}.")
    activations.get_activation(self.hidden_act)

  @property
  def num_layers(self) -> int:  # what generic tooling (e.g. the HF bridge) counts
    return max(self.encoder_layers, self.decoder_layers)

  def replace(self, **changes) -> "BartConfig":
    return dataclasses.replace(self, **changes)


def bart_base(**overrides) -> BartConfig:
  values = dict(hidden_size=768, encoder_layers=6, decoder_layers=6, encoder_heads=12,
                decoder_heads=12, encoder_ffn_size=3072, decoder_ffn_size=3072)
  return BartConfig(**{**values, **overrides})


def bart_large(**overrides) -> BartConfig:
  return BartConfig(**overrides)


SIZES = {"base": bart_base, "large": bart_large}


class BartLayer(nn.Module):
  """Post-norm self-attention, [cross-attention,] feed-forward; a scan body.

  `(x, mask, encoded, cross_mask) -> (x, x | None)`; `encoded` is None in the encoder.
  """
  config: BartConfig
  is_decoder: bool = False
  deterministic: bool = True
  emit_hidden_state: bool = False
  decode: bool = False

  @nn.compact
  def __call__(self, x, mask, encoded=None, cross_mask=None):
    cfg, det = self.config, self.deterministic
    dtype = jnp.dtype(cfg.dtype)
    heads = cfg.decoder_heads if self.is_decoder else cfg.encoder_heads
    ffn_size = cfg.decoder_ffn_size if self.is_decoder else cfg.encoder_ffn_size

    def attend(name, q, kv, m, decode=False, cache_cross_kv=False):
      return attention.MultiHeadAttention(heads, cfg.hidden_size // heads, cfg.attention_dropout,
                                          init_std=cfg.initializer_range, dtype=dtype,
                                          decode=decode, cache_cross_kv=cache_cross_kv,
                                          name=name)(q, kv, mask=m, deterministic=det)

    drop = nn.Dropout(cfg.hidden_dropout)
    x = norms.LayerNorm(cfg.layer_norm_eps, dtype, name="self_attention_norm")(
        x + drop(attend("self_attention", x, None, mask, self.decode), deterministic=det))
    if self.is_decoder:
      x = norms.LayerNorm(cfg.layer_norm_eps, dtype, name="cross_attention_norm")(
          x + drop(attend("cross_attention", x, encoded, cross_mask, cache_cross_kv=self.decode),
                   deterministic=det))
    h = ffn.MlpBlock(ffn_size, cfg.hidden_act, cfg.hidden_dropout,
                     init_std=cfg.initializer_range, dtype=dtype,
                     intermediate_dropout=True, intermediate_dropout_rate=cfg.activation_dropout,
                     name="mlp")(x, deterministic=det)
    x = norms.LayerNorm(cfg.layer_norm_eps, dtype, name="mlp_norm")(x + h)
    x = nn.with_logical_constraint(x, ("batch", "length", "embed"))
    return x, (x if self.emit_hidden_state else None)


class BartStack(nn.Module):
  """token embedding (shared, passed in) + offset positions -> LayerNorm -> layers."""
  config: BartConfig
  is_decoder: bool = False

  @nn.compact
  def __call__(self, input_ids, shared: embeddings.Embed, mask, position_ids=None,
               encoded=None, cross_mask=None, *, deterministic: bool = True,
               decode: bool = False, output_hidden_states: bool = False):
    cfg = self.config
    dtype = jnp.dtype(cfg.dtype)
    x = shared(input_ids)
    if cfg.scale_embedding:
      x = x * math.sqrt(cfg.hidden_size)
    if position_ids is None:
      start = 0
      if decode:  # absolute positions of the new tokens (bertjax.layers.kv_cache)
        start, _ = kv_cache.step_positions(self, input_ids.shape[1])
      else:
        embeddings.check_length(input_ids.shape[1], cfg.max_position_embeddings, "input_ids")
      position_ids = jnp.broadcast_to(start + jnp.arange(input_ids.shape[1]), input_ids.shape)
    positions = embeddings.Embed(cfg.max_position_embeddings + POSITION_OFFSET, cfg.hidden_size,
                                 (None, "embed"), cfg.initializer_range, dtype,
                                 name="position_embeddings")
    x = x + positions(position_ids + POSITION_OFFSET)
    x = norms.LayerNorm(cfg.layer_norm_eps, dtype, name="embedding_norm")(x)
    x = nn.Dropout(cfg.hidden_dropout)(x, deterministic=deterministic)

    layer_cls = nn.remat(BartLayer, prevent_cse=False) if cfg.remat else BartLayer
    args = (x, mask, encoded, cross_mask) if self.is_decoder else (x, mask)
    axes = {"params": 0, "cache": 0, kv_cache.CROSS_COLLECTION: 0,
            **attention.ANALYSIS_AXES}
    num_layers = cfg.decoder_layers if self.is_decoder else cfg.encoder_layers
    stacked = nn.scan(layer_cls, variable_axes=axes,
                      split_rngs={"params": True, "dropout": True},
                      in_axes=(nn.broadcast,) * (len(args) - 1),
                      length=num_layers, unroll=transformer.layers_per_iteration(
                          cfg.scan_unroll, num_layers),
                      metadata_params={nn.PARTITION_NAME: "layers"})
    out, per_layer = stacked(cfg, self.is_decoder, deterministic, output_hidden_states,
                             decode, name="layers")(*args)
    hidden = jnp.concatenate([x[None], per_layer], axis=0) if output_hidden_states else None
    return out, hidden


class BartModel(nn.Module):
  """`last_hidden_state` (decoder) and `encoder_last_hidden_state`, with separate
  `encode` / `decode` methods for generation (see T5Model)."""
  config: BartConfig

  def setup(self):
    cfg = self.config
    self.shared = embeddings.Embed(cfg.vocab_size, cfg.hidden_size, ("vocab", "embed"),
                                   cfg.initializer_range, jnp.dtype(cfg.dtype))
    self.encoder = BartStack(cfg, is_decoder=False)
    self.decoder = BartStack(cfg, is_decoder=True)

  def encode(self, input_ids, attention_mask=None, encoder_segment_ids=None,
             encoder_position_ids=None, *, deterministic: bool = True,
             output_hidden_states: bool = False) -> dict:
    mask = attention.encoder_mask(attention_mask, encoder_segment_ids)
    out, hidden = self.encoder(input_ids, self.shared, mask, encoder_position_ids,
                               deterministic=deterministic,
                               output_hidden_states=output_hidden_states)
    return {"encoder_last_hidden_state": out, "encoder_hidden_states": hidden}

  def decode(self, decoder_input_ids, encoder_hidden_states, attention_mask=None,
             decoder_attention_mask=None, encoder_segment_ids=None, decoder_segment_ids=None,
             decoder_position_ids=None, *, deterministic: bool = True, decode: bool = False,
             output_hidden_states: bool = False) -> dict:
    self_mask, cross_mask = encoder_decoder.decoder_masks(
        decoder_input_ids.shape[1], attention_mask, decoder_attention_mask,
        encoder_segment_ids, decoder_segment_ids, decode=decode)
    out, hidden = self.decoder(decoder_input_ids, self.shared, self_mask, decoder_position_ids,
                               encoder_hidden_states, cross_mask, deterministic=deterministic,
                               decode=decode, output_hidden_states=output_hidden_states)
    return {"last_hidden_state": out, "decoder_hidden_states": hidden}

  def __call__(self, input_ids, decoder_input_ids, attention_mask=None,
               decoder_attention_mask=None, encoder_segment_ids=None, decoder_segment_ids=None,
               encoder_position_ids=None, decoder_position_ids=None, *,
               deterministic: bool = True, output_hidden_states: bool = False) -> dict:
    enc = self.encode(input_ids, attention_mask, encoder_segment_ids, encoder_position_ids,
                      deterministic=deterministic, output_hidden_states=output_hidden_states)
    dec = self.decode(decoder_input_ids, enc["encoder_last_hidden_state"], attention_mask,
                      decoder_attention_mask, encoder_segment_ids, decoder_segment_ids,
                      decoder_position_ids, deterministic=deterministic,
                      output_hidden_states=output_hidden_states)
    return {**enc, **dec}


class BartForConditionalGeneration(encoder_decoder.WithLogits):
  """BartModel + tied output projection + `final_logits_bias`: `logits`."""
  config: BartConfig

  def setup(self):
    self.model = BartModel(self.config)
    # A buffer in the reference (zeros unless a checkpoint sets it); [1, vocab] like there.
    self.final_logits_bias = self.param(
        "final_logits_bias", nn.with_logical_partitioning(nn.initializers.zeros, (None, "vocab")),
        (1, self.config.vocab_size), jnp.float32)

  def logits(self, hidden: jax.Array) -> jax.Array:
    logits = self.model.shared.attend(hidden) + self.final_logits_bias.astype(hidden.dtype)
    return nn.with_logical_constraint(logits, ("batch", "length", "vocab"))

  @property
  def wrapped(self) -> nn.Module:
    return self.model
