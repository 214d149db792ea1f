"""DeBERTa (He et al., 2021) v1 and v2/v3: disentangled attention, enhanced mask decoder.

* `version=1` (microsoft/deberta-*): fused q/k/v projection, relative distances used
  as is up to `max_relative_positions`.
* `version=2` (deberta-v2 / v3): separate projections, optional log-bucketed distances
  (`position_buckets`), `share_att_key` and a LayerNorm on the relative table
  (`norm_rel_ebd`). v2's optional convolution after the first layer (`conv_kernel_size`)
  is not implemented; HF's DebertaV2Config defaults and the v3 checkpoints do not use it.

Absolute positions: DeBERTa does not add them to the input (`position_biased_input=False`
in the released models); the enhanced mask decoder (EMD, `enhanced_mask_decoder=True`)
injects them right before the MLM head instead. As in microsoft/DeBERTa's
masked_language_model.py, the EMD is the encoder's LAST layer (its own parameters: no extra
layer) applied `emd_steps` (2) times with keys / values the penultimate hidden state H' (the
last layer's input) and queries starting at H' + P (absolute position embeddings), each
pass's output the next pass's queries. `emd_separate_layer=True` keeps bertjax's earlier
variant: an extra, separately parameterised layer (params `emd/layer`) over the encoder
output H with queries H + P. HF's DebertaForMaskedLM has no EMD; with it off our head
equals HF's (legacy `cls.predictions` or `lm_predictions` layout).
"""
import dataclasses
from typing import Optional

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from bertjax.layers import attention, dense, embeddings, norms
from bertjax.models.common.config import EncoderConfig
from bertjax.models.deberta import disentangled, relative
from bertjax.models import bert


@dataclasses.dataclass(frozen=True)
class DebertaConfig(EncoderConfig):
  """Defaults: DeBERTa-v3-base."""
  # The task classes' ContextPooler (transformers' pooler_dropout / pooler_hidden_act).
  pooler_dropout: float = 0.0
  pooler_hidden_act: str = "gelu"
  vocab_size: int = 128100
  type_vocab_size: int = 0
  layer_norm_eps: float = 1e-7
  embedding_size: Optional[int] = None   # None: hidden_size (else embed_proj E -> H)
  version: int = 2
  relative_attention: bool = True
  max_relative_positions: int = -1       # < 1: max_position_embeddings
  position_buckets: int = 256            # v2 only; <= 0: exact distances
  pos_att_type: tuple[str, ...] = ("p2c", "c2p")
  share_att_key: bool = True             # v2 only
  norm_rel_ebd: bool = True              # v2 only: LayerNorm on the relative table
  position_biased_input: bool = False
  legacy_mlm_head: bool = True           # HF `legacy`: cls.predictions (H -> E) head layout
  enhanced_mask_decoder: bool = False
  emd_steps: int = 2
  # False: the EMD reuses the last encoder layer (the released code); True: an extra layer.
  emd_separate_layer: bool = False

  def __post_init__(self):
    super().__post_init__()
    if self.version not in (1, 2):
      raise ValueError(f"version={self.version}: use 1 (DeBERTa) or 2 (DeBERTa v2/v3).")
    if self.attention_implementation != "xla":
      raise ValueError(f"attention_implementation={self.attention_implementation!r}: DeBERTa's "
                       "disentangled attention adds relative-position terms that no fused "
                       "kernel takes; use 'xla'.")
    unknown = set(self.pos_att_type) - set(disentangled.RELATIVE_TERMS)
    if unknown:
      raise ValueError(f"pos_att_type has {sorted(unknown)}; use a subset of "
                       f"{disentangled.RELATIVE_TERMS}.")
    if self.enhanced_mask_decoder and self.position_biased_input:
      raise ValueError("enhanced_mask_decoder=True injects absolute positions before the MLM "
                       "head; it needs position_biased_input=False (positions not in the input).")
    if self.enhanced_mask_decoder and self.embed_dim != self.hidden_size:
      raise ValueError("enhanced_mask_decoder needs embedding_size == hidden_size.")

  @property
  def embed_dim(self) -> int:
    return self.embedding_size or self.hidden_size

  @property
  def max_positions(self) -> int | None:
    """Relative positions alone take any length; absolute ones (in the input or the EMD)
    end with their table."""
    uses_table = self.position_biased_input or self.enhanced_mask_decoder
    return self.max_position_embeddings if uses_table else None

  @property
  def max_relative(self) -> int:
    return self.max_relative_positions if self.max_relative_positions >= 1 \
        else self.max_position_embeddings

  @property
  def uses_buckets(self) -> bool:
    return self.version == 2 and self.position_buckets > 0

  @property
  def rel_table_size(self) -> int:
    return 2 * (self.position_buckets if self.uses_buckets else self.max_relative)


def _config(defaults: dict, overrides: dict) -> DebertaConfig:
  return DebertaConfig(**{**defaults, **overrides})


def deberta_v3_xsmall(**kw) -> DebertaConfig:
  return _config(dict(hidden_size=384, num_heads=6, intermediate_size=1536), kw)


def deberta_v3_small(**kw) -> DebertaConfig:
  return _config(dict(num_layers=6), kw)


def deberta_v3_base(**kw) -> DebertaConfig:
  return _config({}, kw)


def deberta_v3_large(**kw) -> DebertaConfig:
  return _config(dict(hidden_size=1024, num_layers=24, num_heads=16, intermediate_size=4096), kw)


# DeBERTa v1: RoBERTa's BPE vocabulary, exact relative distances, separate c2p / p2c keys.
_V1 = dict(vocab_size=50265, version=1, pos_att_type=("c2p", "p2c"), share_att_key=False,
           norm_rel_ebd=False, position_buckets=-1)


def deberta_base(**kw) -> DebertaConfig:
  return _config(_V1, kw)


def deberta_large(**kw) -> DebertaConfig:
  return _config(dict(_V1, hidden_size=1024, num_layers=24, num_heads=16, intermediate_size=4096),
                 kw)


SIZES = {"v3_xsmall": deberta_v3_xsmall, "v3_small": deberta_v3_small, "v3_base": deberta_v3_base,
         "v3_large": deberta_v3_large, "base": deberta_base, "large": deberta_large}


def attention_mask_2d(attention_mask, segment_ids) -> Optional[jax.Array]:
  """[B, 1, L, L]: DeBERTa masks queries as well as keys (padding rows see nothing and
  get uniform attention, as in the reference), plus packing segments."""
  query_key = None
  if attention_mask is not None:
    m = attention_mask.astype(bool)
    query_key = (m[:, :, None] & m[:, None, :])[:, None]
  return attention.combine_masks(
      query_key, None if segment_ids is None else attention.segment_mask(segment_ids))


class DebertaEmbeddings(nn.Module):
  """word (+ absolute position) (+ token type) -> [embed_proj] -> LayerNorm -> x mask -> dropout.

  The absolute position table exists when positions enter the input or feed the EMD.
  """
  config: DebertaConfig

  def setup(self):
    cfg = self.config
    dtype = jnp.dtype(cfg.dtype)
    make = lambda n, axes: embeddings.Embed(n, cfg.embed_dim, axes, cfg.initializer_range, dtype)
    self.word_embeddings = make(cfg.vocab_size, ("vocab", "embed"))
    if cfg.position_biased_input or cfg.enhanced_mask_decoder:
      self.position_embeddings = make(cfg.max_position_embeddings, (None, "embed"))
    if cfg.type_vocab_size:
      self.token_type_embeddings = make(cfg.type_vocab_size, (None, "embed"))
    if cfg.embed_dim != cfg.hidden_size:
      self.embed_proj = dense.DenseGeneral(cfg.hidden_size, (None, "embed"), use_bias=False,
                                           init_std=cfg.initializer_range, dtype=dtype)
    self.layer_norm = norms.LayerNorm(cfg.layer_norm_eps, dtype)
    self.dropout = nn.Dropout(cfg.hidden_dropout)

  def __call__(self, input_ids, attention_mask=None, token_type_ids=None, position_ids=None, *,
               deterministic: bool = True) -> jax.Array:
    cfg = self.config
    x = self.word_embeddings(input_ids)
    if cfg.position_biased_input:
      positions = default_positions(input_ids, position_ids, cfg.max_positions)
      x = x + self.position_embeddings(positions)
    if cfg.type_vocab_size:
      x = x + self.token_type_embeddings(
          jnp.zeros_like(input_ids) if token_type_ids is None else token_type_ids)
    if cfg.embed_dim != cfg.hidden_size:
      x = self.embed_proj(x)
    x = self.layer_norm(x)
    if attention_mask is not None:
      x = x * attention_mask[..., None].astype(x.dtype)
    x = self.dropout(x, deterministic=deterministic)
    return nn.with_logical_constraint(x, ("batch", "length", "embed"))


def default_positions(input_ids, position_ids, max_positions: int | None = None):
  """0, 1, ... per row unless given; rows longer than the absolute table are refused."""
  if position_ids is None:
    embeddings.check_length(input_ids.shape[-1], max_positions, "input_ids")
    return jnp.broadcast_to(jnp.arange(input_ids.shape[-1]), input_ids.shape)
  return position_ids


def relative_index(config: DebertaConfig, length: int) -> np.ndarray:
  """[L, L]: the relative-embedding row each (query, key) pair reads."""
  distance = relative.relative_positions(length, length)
  if config.version == 1:
    return relative.span_index(distance, min(length, config.max_relative))
  if config.uses_buckets:
    distance = relative.log_bucket_positions(distance, config.position_buckets,
                                             config.max_relative)
  return relative.span_index(distance, config.rel_table_size // 2)


def _layer_kwargs(cfg: DebertaConfig) -> dict:
  return dict(num_heads=cfg.num_heads, head_dim=cfg.head_dim,
              intermediate_size=cfg.intermediate_size, version=cfg.version,
              pos_att_type=tuple(cfg.pos_att_type), relative_attention=cfg.relative_attention,
              share_att_key=cfg.share_att_key and cfg.version == 2, activation=cfg.hidden_act,
              hidden_dropout=cfg.hidden_dropout, attention_dropout=cfg.attention_dropout,
              layer_norm_eps=cfg.layer_norm_eps, init_std=cfg.initializer_range,
              dtype=jnp.dtype(cfg.dtype))


class DebertaEncoder(nn.Module):
  """The relative-position table (shared by all layers) and the scanned layer stack."""
  config: DebertaConfig

  def setup(self):
    cfg = self.config
    if cfg.relative_attention:
      self.rel_embeddings = embeddings.Embed(cfg.rel_table_size, cfg.hidden_size,
                                             ("relpos_buckets", "embed"), cfg.initializer_range,
                                             jnp.dtype(cfg.dtype))
      if cfg.version == 2 and cfg.norm_rel_ebd:
        self.rel_norm = norms.LayerNorm(cfg.layer_norm_eps, jnp.dtype(cfg.dtype))
    self.stack = disentangled.DisentangledStack(cfg.num_layers, tuple(_layer_kwargs(cfg).items()),
                                                cfg.remat, cfg.scan_unroll)

  def relative_table(self, length: int):
    """(relative embeddings [R, H], index [L, L] into them) for length L, or Nones.

    Only the rows some (query, key) pair reads are kept (e.g. 255 of v3's 512 at L=128):
    c2p / p2c score every row against every token, so unused rows are wasted work.
    """
    cfg = self.config
    if not cfg.relative_attention:
      return None, None
    table = jnp.asarray(self.rel_embeddings.embedding, jnp.dtype(cfg.dtype))
    if cfg.version == 1:
      # v1 indexes a window of min(L, max_relative) rows each side of the centre.
      span = min(length, cfg.max_relative)
      table = table[cfg.max_relative - span:cfg.max_relative + span]
    index = relative_index(cfg, length)
    first, last = int(index.min()), int(index.max())
    table = table[first:last + 1]
    if cfg.version == 2 and cfg.norm_rel_ebd:
      table = self.rel_norm(table)  # per row, so normalising only the kept rows is exact
    return table, jnp.asarray(index - first)

  def __call__(self, x, mask, *, deterministic: bool = True, output_hidden_states: bool = False,
               keep_last_input: bool = False):
    """(output, per-layer states or None[, the last layer's input]): see DisentangledStack."""
    table, index = self.relative_table(x.shape[1])
    return self.stack(x, mask, table, index, deterministic=deterministic,
                      output_hidden_states=output_hidden_states, keep_last_input=keep_last_input)


class DebertaModel(nn.Module):
  """Embeddings -> disentangled-attention encoder. No pooler (HF DebertaModel has none)."""
  config: DebertaConfig

  def setup(self):
    self.embeddings = DebertaEmbeddings(self.config)
    self.encoder = DebertaEncoder(self.config)

  def __call__(self, input_ids, attention_mask=None, token_type_ids=None, position_ids=None,
               segment_ids=None, *, deterministic: bool = True,
               output_hidden_states: bool = False, keep_last_input: bool = False) -> dict:
    """keep_last_input: also return the last layer's input as `last_layer_input` (the EMD's)."""
    x = self.embeddings(input_ids, attention_mask, token_type_ids, position_ids,
                        deterministic=deterministic)
    out, per_layer, *last_input = self.encoder(
        x, attention_mask_2d(attention_mask, segment_ids), deterministic=deterministic,
        output_hidden_states=output_hidden_states, keep_last_input=keep_last_input)
    result = {"last_hidden_state": out, "pooler_output": None}
    if keep_last_input:
      result["last_layer_input"] = last_input[0]
    if output_hidden_states:
      result["hidden_states"] = jnp.concatenate([x[None], per_layer], axis=0)
    return result


class EnhancedMaskDecoder(nn.Module):
  """The `emd_separate_layer=True` EMD: queries H + P refined by `emd_steps` passes of one
  extra disentangled layer attending over the encoder output H."""
  config: DebertaConfig

  @nn.compact
  def __call__(self, hidden, positions, mask, rel_table, rel_index, *, deterministic: bool = True):
    layer = disentangled.DisentangledLayer(**_layer_kwargs(self.config),
                                           deterministic=deterministic, name="layer")
    query = hidden + positions
    for _ in range(self.config.emd_steps):
      query, _ = layer(hidden, mask, rel_table, rel_index, query)
    return query


class DebertaForMaskedLM(nn.Module):
  """DeBERTa with the MLM head (`logits`), optionally behind the enhanced mask decoder."""
  config: DebertaConfig

  def setup(self):
    self.deberta = DebertaModel(self.config)
    self.mlm_head = bert.MlmHead(self.config)
    if self.config.enhanced_mask_decoder and self.config.emd_separate_layer:
      self.emd = EnhancedMaskDecoder(self.config)

  def __call__(self, input_ids, attention_mask=None, token_type_ids=None, position_ids=None,
               segment_ids=None, *, deterministic: bool = True,
               output_hidden_states: bool = False) -> dict:
    cfg = self.config
    shared_emd = cfg.enhanced_mask_decoder and not cfg.emd_separate_layer
    out = self.deberta(input_ids, attention_mask, token_type_ids, position_ids, segment_ids,
                       deterministic=deterministic, output_hidden_states=output_hidden_states,
                       keep_last_input=shared_emd)
    hidden = out["last_hidden_state"]
    if cfg.enhanced_mask_decoder:
      positions = self.deberta.embeddings.position_embeddings(
          default_positions(input_ids, position_ids, self.config.max_positions))
      table, index = self.deberta.encoder.relative_table(input_ids.shape[1])
      mask = attention_mask_2d(attention_mask, segment_ids)
      if cfg.emd_separate_layer:
        hidden = self.emd(hidden, positions, mask, table, index, deterministic=deterministic)
      else:
        keys = out.pop("last_layer_input")
        hidden = keys + positions
        for _ in range(cfg.emd_steps):
          hidden = self.deberta.encoder.stack.last_layer(keys, mask, table, index, hidden,
                                                         deterministic=deterministic)
    out["logits"] = self.mlm_head(hidden, self.deberta.embeddings.word_embeddings)
    return out
