"""SpanBERT (Joshi et al., 2020): BERT pretrained with span masking and the span-boundary
objective (SBO), without NSP.

The encoder is BERT's (params under `bert`, so BERT checkpoints load and SpanBERT
encoders export as BERT). The SBO head predicts every token x_i of a masked span
(s..e) from the two tokens just outside it and the token's position inside it:

  h = LN(GELU(W2 . LN(GELU(W1 . [x_{s-1}; x_{e+1}; p_{i-s}]))))
  logits = h . E^T + b        (E: the tied word embeddings, as for MLM)

The data layer (bertjax.data.preprocessors.span_masking) gives, for every position,
`sbo_left` / `sbo_right` (the boundary positions) and `sbo_pos` (1-based offset in
the span); they are only meaningful where `mlm_weights` is set.
"""
import dataclasses
from typing import ClassVar

import flax.linen as nn
import jax
import jax.numpy as jnp

from bertjax.layers import activations, dense, embeddings, norms
from bertjax.models import bert


@dataclasses.dataclass(frozen=True)
class SpanBertConfig(bert.BertConfig):
  vocab_size: int = 28996  # SpanBERT's released models use BERT's cased vocabulary
  # Relative positions p_0 .. p_{n-1} inside a span (longer spans share the last one),
  # and their width, as in the released code (max_pair_targets, position_embedding_size).
  sbo_max_positions: int = 20
  sbo_position_size: int = 200


def spanbert_base(**overrides) -> SpanBertConfig:
  return SpanBertConfig(**overrides)


def spanbert_large(**overrides) -> SpanBertConfig:
  return SpanBertConfig(**{**dict(hidden_size=1024, num_layers=24, num_heads=16,
                                  intermediate_size=4096), **overrides})


SIZES = {"base": spanbert_base, "large": spanbert_large}


def span_boundary_inputs(hidden: jax.Array, sbo_left: jax.Array,
                         sbo_right: jax.Array) -> tuple[jax.Array, jax.Array]:
  """(x_{s-1}, x_{e+1}) for every position: hidden [B, L, H] gathered at [B, L] indices."""
  take = lambda idx: jnp.take_along_axis(hidden, idx[..., None].astype(jnp.int32), axis=1)
  return take(sbo_left), take(sbo_right)


def relative_positions(sbo_pos: jax.Array, max_positions: int) -> jax.Array:
  """1-based offsets from the data -> rows 0.. of the position table (clipped)."""
  return jnp.clip(sbo_pos - 1, 0, max_positions - 1)


class SpanBoundaryHead(nn.Module):
  """The SBO head: a 2-layer GELU + LayerNorm MLP, then the tied output embedding."""
  config: SpanBertConfig

  @nn.compact
  def __call__(self, hidden: jax.Array, sbo_left: jax.Array, sbo_right: jax.Array,
               sbo_pos: jax.Array, word_embeddings: embeddings.Embed) -> jax.Array:
    cfg = self.config
    dtype = jnp.dtype(cfg.dtype)
    act = activations.get_activation(cfg.hidden_act)
    left, right = span_boundary_inputs(hidden, sbo_left, sbo_right)
    positions = embeddings.Embed(cfg.sbo_max_positions, cfg.sbo_position_size, (None, None),
                                 cfg.initializer_range, dtype, name="position_embeddings")
    x = jnp.concatenate(
        [left, right, positions(relative_positions(sbo_pos, cfg.sbo_max_positions))], -1)
    x = dense.DenseGeneral(cfg.hidden_size, (None, "mlp"), init_std=cfg.initializer_range,
                           dtype=dtype, name="dense1")(x)
    x = norms.LayerNorm(cfg.layer_norm_eps, dtype, axis_name="mlp", name="norm1")(act(x))
    x = dense.DenseGeneral(word_embeddings.features, ("mlp", "embed"),
                           init_std=cfg.initializer_range, dtype=dtype, name="dense2")(x)
    x = norms.LayerNorm(cfg.layer_norm_eps, dtype, name="norm2")(act(x))
    bias = self.param("bias", nn.with_logical_partitioning(nn.initializers.zeros, ("vocab",)),
                      (word_embeddings.num_embeddings,), jnp.float32)
    logits = word_embeddings.attend(x) + bias.astype(dtype)
    return nn.with_logical_constraint(logits, ("batch", "length", "vocab"))


class SpanBertForPreTraining(nn.Module):
  """BERT encoder + MLM head (`prediction_logits`) + SBO head (`sbo_logits`, when the
  SBO features are given)."""
  # Released as BERT: what `open_model` gives for a run of it (bertjax.checkpoints.record),
  # its params cut by `release` (the SBO head serves pretraining only).
  RELEASED_AS: ClassVar[str] = "BertForMaskedLM"
  config: SpanBertConfig

  @staticmethod
  def release(params: dict) -> dict:
    return bert_params(params)

  def setup(self):
    self.bert = bert.BertModel(self.config, add_pooling_layer=False)
    self.mlm_head = bert.MlmHead(self.config)
    self.sbo_head = SpanBoundaryHead(self.config)

  def __call__(self, input_ids, attention_mask=None, token_type_ids=None, position_ids=None,
               segment_ids=None, sbo_left=None, sbo_right=None, sbo_pos=None,
               masked_positions=None, *, deterministic: bool = True,
               output_hidden_states: bool = False) -> dict:
    out = self.bert(input_ids, attention_mask, token_type_ids, position_ids, segment_ids,
                    deterministic=deterministic, output_hidden_states=output_hidden_states)
    word_embeddings = self.bert.embeddings.word_embeddings
    hidden = out["last_hidden_state"]
    out["prediction_logits"] = self.mlm_head(hidden, word_embeddings, masked_positions)
    if sbo_left is not None:
      if sbo_right is None or sbo_pos is None:
        raise ValueError("SBO needs sbo_left, sbo_right and sbo_pos together (features of "
                         "bertjax.data.preprocessors.span_masking).")
      if masked_positions is not None:
        at = lambda feature: jnp.take_along_axis(feature, masked_positions, axis=1)
        sbo_left, sbo_right, sbo_pos = at(sbo_left), at(sbo_right), at(sbo_pos)
      out["sbo_logits"] = self.sbo_head(hidden, sbo_left, sbo_right, sbo_pos, word_embeddings)
    return out


def bert_params(params: dict) -> dict:
  """BertForMaskedLM params (the encoder and the MLM head) from SpanBertForPreTraining
  params: the SBO head serves pretraining only (SpanBERT was released as BERT models)."""
  return {"bert": params["bert"], "mlm_head": params["mlm_head"]}
