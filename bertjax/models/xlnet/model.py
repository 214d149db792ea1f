"""XLNet (Yang et al., 2019): permutation LM with two-stream attention and XL memory.

    out = XLNetLMHeadModel(cfg).apply({'params': p}, input_ids, attention_mask,
                                      token_type_ids, perm_mask=..., target_mapping=...,
                                      mems=...)
    out['logits']   # [B, P, V] query-stream predictions for the P targets
    out['mems']     # [num_layers, B, M, H] memory for the next segment

Conventions (as transformers / the reference code):
  perm_mask [B, L, L]       1 = position i may NOT attend to j (the factorization order)
  target_mapping [B, P, L]  one-hot: row p predicts position l
  mems [layers, B, M, H]    each layer's *input* hidden states of earlier segments; all
                            of memory is visible to every position
With target_mapping the model runs both streams and `last_hidden_state` is the query
stream [B, P, H]; without it only the content stream runs (fine-tuning) and
`last_hidden_state` is [B, L, H]. Memory is batch-major here; the HF bridge converts
to and from transformers' [M, B, H] per layer.
"""
import dataclasses
from typing import Optional

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from bertjax.layers import activations, attention, embeddings, ffn, norms, transformer
from bertjax.models.common.config import AttentionAndLabels, check_labels
from bertjax.models.xlnet import two_stream


@dataclasses.dataclass(frozen=True)
class XLNetConfig(AttentionAndLabels):
  vocab_size: int = 32000
  hidden_size: int = 1024
  num_layers: int = 24
  num_heads: int = 16
  intermediate_size: int = 4096
  hidden_act: str = "gelu"
  hidden_dropout: float = 0.1  # dropout: every sublayer's, attention weights too
  layer_norm_eps: float = 1e-12
  initializer_range: float = 0.02
  attn_type: str = "bi"        # 'bi' (XLNet) or 'uni' (causal, Transformer-XL)
  bi_data: bool = False        # second half of the batch reads backwards
  clamp_len: int = -1          # clip relative distances (-1: no clipping)
  same_length: bool = False    # 'uni': every query sees the same number of keys
  mem_len: Optional[int] = 512  # memory kept per layer (None/0: all of it)
  reuse_len: Optional[int] = None  # only the first reuse_len positions enter memory
  pad_token_id: int = 5
  # Task classes (models/xlnet/tasks.py): the labels' names in id order and how a
  # classifier's outputs are read (transformers' id2label, problem_type), the sequence
  # summary (XLNetSequenceSummary: which token, the dropout after its dense + tanh).
  labels: tuple[str, ...] = ("LABEL_0", "LABEL_1")
  problem_type: str | None = None
  summary_type: str = "last"
  summary_last_dropout: float = 0.1
  dtype: str = "float32"
  remat: bool = False
  scan_unroll: int = 0  # layers per loop iteration; 0: by backend (layers_per_iteration)

  def __post_init__(self):
    if self.hidden_size % self.num_heads:
      raise ValueError(f"hidden_size={self.hidden_size} is not a multiple of "
                       f"num_heads={self.num_heads}.")
    if self.hidden_size % 2:
      raise ValueError(f"hidden_size={self.hidden_size} must be even (sin/cos position pairs).")
    if self.summary_type not in ("last", "first", "mean"):
      raise ValueError(f"summary_type={self.summary_type!r}: use 'last', 'first' or 'mean'.")
    two_stream.relative_distances(1, 0, self.attn_type)  # validates attn_type
    activations.get_activation(self.hidden_act)
    check_labels(self)


def xlnet_tiny(**overrides) -> XLNetConfig:
  values = dict(hidden_size=64, num_layers=2, num_heads=4, intermediate_size=256, mem_len=16)
  return XLNetConfig(**{**values, **overrides})


def xlnet_base(**overrides) -> XLNetConfig:
  values = dict(hidden_size=768, num_layers=12, num_heads=12, intermediate_size=3072)
  return XLNetConfig(**{**values, **overrides})


def xlnet_large(**overrides) -> XLNetConfig:
  return XLNetConfig(**overrides)


SIZES = {"tiny": xlnet_tiny, "base": xlnet_base, "large": xlnet_large}


class XLNetLayer(nn.Module):
  """Two-stream relative attention, then one feed-forward block applied to each stream."""
  config: XLNetConfig
  deterministic: bool = True

  @nn.compact
  def __call__(self, streams, memory, pos_emb, seg_diff, mask_h, mask_g, target_mapping):
    cfg = self.config
    dtype = jnp.dtype(cfg.dtype)
    h, g = streams
    h, g = two_stream.TwoStreamRelativeAttention(
        cfg.num_heads, cfg.head_dim, cfg.hidden_dropout, cfg.layer_norm_eps, cfg.initializer_range,
        dtype, name="attention")(h, g, memory, pos_emb, seg_diff, mask_h, mask_g,
                                 target_mapping, deterministic=self.deterministic)
    mlp = ffn.MlpBlock(cfg.intermediate_size, cfg.hidden_act, cfg.hidden_dropout,
                       init_std=cfg.initializer_range, dtype=dtype, intermediate_dropout=True,
                       name="mlp")
    mlp_norm = norms.LayerNorm(cfg.layer_norm_eps, dtype, name="mlp_norm")
    feed_forward = lambda x: mlp_norm(x + mlp(x, deterministic=self.deterministic))
    new_h = feed_forward(h)
    new_g = None if g is None else feed_forward(g)
    # Emit the layer's input h: the memory the next segment sees at this depth.
    return (new_h, new_g), (streams[0], new_g)


def attention_masks(batch: int, qlen: int, mlen: int, cfg: XLNetConfig,
                    attention_mask=None, perm_mask=None):
  """(content mask, query mask), [B, 1, L, M + L] bool, True = may attend; None = all.

  Blocked: future keys (attn_type 'uni'), padding keys, and perm_mask; memory is
  never blocked by the data. The content stream additionally always sees itself.
  """
  blocked = None
  if cfg.attn_type == "uni":
    i, j = np.arange(qlen)[:, None], np.arange(mlen + qlen)[None, :]
    causal = j > i + mlen
    if cfg.same_length:
      causal |= (j < i) & (j < qlen)
    blocked = jnp.asarray(causal)[None]
  data = None
  if attention_mask is not None:
    data = jnp.broadcast_to((attention_mask == 0)[:, None, :], (batch, qlen, qlen))
  if perm_mask is not None:
    perm = perm_mask > 0
    data = perm if data is None else data | perm
  if data is not None:
    data = jnp.pad(data, ((0, 0), (0, 0), (mlen, 0)))
    blocked = data if blocked is None else blocked | data
  if blocked is None:
    return None, None
  self_key = jnp.asarray(np.eye(qlen, mlen + qlen, mlen, dtype=bool))[None]
  return ~(blocked & ~self_key)[:, None], ~blocked[:, None]


def next_memory(layer_inputs: jax.Array, mems: Optional[jax.Array], cfg: XLNetConfig):
  """[layers, B, L, H] layer inputs (+ old memory) -> the memory for the next segment."""
  current = layer_inputs
  if cfg.reuse_len:
    current = current[:, :, :cfg.reuse_len]
  if mems is not None:
    current = jnp.concatenate([mems.astype(current.dtype), current], axis=2)
  if cfg.mem_len:
    current = current[:, :, -cfg.mem_len:]
  return jax.lax.stop_gradient(current)


class XLNetModel(nn.Module):
  """Word embedding + mask embedding, relative encodings, `num_layers` XLNetLayers."""
  config: XLNetConfig

  @nn.compact
  def __call__(self, input_ids, attention_mask=None, token_type_ids=None, position_ids=None,
               segment_ids=None, *, perm_mask=None, target_mapping=None, mems=None,
               deterministic: bool = True, output_hidden_states: bool = False) -> dict:
    if position_ids is not None or segment_ids is not None:
      raise ValueError("XLNet takes no position_ids / segment_ids: positions are relative "
                       "and permutation LM examples are not packed.")
    cfg = self.config
    dtype = jnp.dtype(cfg.dtype)
    batch, qlen = input_ids.shape
    mlen = 0 if mems is None else mems.shape[2]
    dropout = nn.Dropout(cfg.hidden_dropout)
    word_embeddings = embeddings.Embed(cfg.vocab_size, cfg.hidden_size, ("vocab", "embed"),
                                       cfg.initializer_range, dtype, name="word_embeddings")
    h = dropout(word_embeddings(input_ids), deterministic=deterministic)
    h = nn.with_logical_constraint(h, ("batch", "length", "embed"))
    # The query stream's input: one learned vector standing in for every target.
    mask_emb = self.param("mask_emb", nn.with_logical_partitioning(
        nn.initializers.normal(cfg.initializer_range), (None, None, "embed")),
        (1, 1, cfg.hidden_size), jnp.float32)
    g = None
    if target_mapping is not None:
      g = jnp.broadcast_to(mask_emb.astype(dtype), (batch, target_mapping.shape[1],
                                                    cfg.hidden_size))
      g = dropout(g, deterministic=deterministic)

    mask_h, mask_g = attention_masks(batch, qlen, mlen, cfg, attention_mask, perm_mask)
    seg_diff = None
    if token_type_ids is not None:
      # Memory counts as segment 0, as in the reference.
      keys = jnp.pad(token_type_ids, ((0, 0), (mlen, 0)))
      seg_diff = token_type_ids[:, :, None] != keys[:, None, :]
    pos_emb = two_stream.relative_position_embedding(
        batch, qlen, mlen, cfg.hidden_size, cfg.attn_type, cfg.bi_data, cfg.clamp_len)
    pos_emb = dropout(pos_emb.astype(dtype), deterministic=deterministic)

    layer_cls = nn.remat(XLNetLayer, prevent_cse=False) if cfg.remat else XLNetLayer
    stack = nn.scan(layer_cls, variable_axes={"params": 0, **attention.ANALYSIS_AXES},
                    split_rngs={"params": True, "dropout": True},
                    in_axes=(0,) + (nn.broadcast,) * 5, length=cfg.num_layers,
                    unroll=transformer.layers_per_iteration(cfg.scan_unroll, cfg.num_layers),
                    metadata_params={nn.PARTITION_NAME: "layers"})
    (h, g), (layer_inputs, g_states) = stack(cfg, deterministic, name="layers")(
        (h, g), mems, pos_emb, seg_diff, mask_h, mask_g,
        None if target_mapping is None else target_mapping.astype(dtype))
    output = dropout(h if g is None else g, deterministic=deterministic)
    result = {"last_hidden_state": output, "pooler_output": None,
              "mems": next_memory(layer_inputs, mems, cfg)}
    if output_hidden_states:
      result["hidden_states"] = jnp.concatenate([layer_inputs, h[None]], axis=0)
      if g is not None:  # each layer's query-stream output [layers, B, P, H]
        result["query_hidden_states"] = g_states
    return result


class XLNetLMHeadModel(nn.Module):
  """XLNet + the LM head tied to the word embeddings: `logits` (and `mems`)."""
  config: XLNetConfig

  @nn.compact
  def __call__(self, input_ids, attention_mask=None, token_type_ids=None, position_ids=None,
               segment_ids=None, *, perm_mask=None, target_mapping=None, mems=None,
               deterministic: bool = True, output_hidden_states: bool = False) -> dict:
    cfg = self.config
    transformer = XLNetModel(cfg, name="transformer")
    out = transformer(input_ids, attention_mask, token_type_ids, position_ids, segment_ids,
                      perm_mask=perm_mask, target_mapping=target_mapping, mems=mems,
                      deterministic=deterministic, output_hidden_states=output_hidden_states)
    table = nn.unbox(transformer.variables["params"]["word_embeddings"]["embedding"])
    hidden = out["last_hidden_state"]
    logits = jnp.einsum("...e,ve->...v", hidden, jnp.asarray(table, hidden.dtype))
    bias = self.param("lm_bias", nn.with_logical_partitioning(nn.initializers.zeros, ("vocab",)),
                      (cfg.vocab_size,), jnp.float32)
    out["logits"] = nn.with_logical_constraint(logits + bias.astype(logits.dtype),
                                               ("batch", "length", "vocab"))
    return out
