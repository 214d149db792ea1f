"""Sentence-BERT (Reimers & Gurevych, 2019): one shared encoder, pooled to a vector.

`SentenceEncoder` turns a batch of sentences into fixed-size embeddings with any
encoder that follows the bertjax Model interface (`last_hidden_state` out of
`input_ids, attention_mask, ...`). `SiameseModel` runs the *same* encoder (tied
weights: there is only one set of parameters) over every sentence of a pair / triplet /
anchor+candidates tuple, by folding the tuple axis into the batch, and optionally adds
the SBERT classification head softmax(W [u; v; |u - v|]).

Pooling of packed rows (several sentences in one row, told apart by `segment_ids`) is
here too: the fast encoding path (`bertjax.encode`) packs short sentences to avoid
padding, and needs the same mean / max / [CLS] pooling per segment.
"""
from typing import Optional

import flax.linen as nn
import jax
import jax.numpy as jnp

POOLING_MODES = ("mean", "max", "cls")
# Packed training rows hold at most this many sentences (SiameseModel pools
# [rows, this, H]; sbert.data.packed_batches fills them).
SENTENCES_PER_ROW = 16


def _check_mode(mode: str) -> None:
  if mode not in POOLING_MODES:
    raise ValueError(f"Unknown pooling {mode!r}; expected one of {POOLING_MODES}.")


def pool(hidden: jax.Array, attention_mask: jax.Array, mode: str = "mean") -> jax.Array:
  """[B, L, H] token states -> [B, H] sentence vectors, ignoring padding.

  mean: average over real tokens (sentence-transformers' default);
  max: element-wise max over real tokens; cls: the first token's state.
  """
  _check_mode(mode)
  if mode == "cls":
    return hidden[:, 0]
  mask = attention_mask.astype(hidden.dtype)[..., None]
  if mode == "mean":
    # Clamp as sentence-transformers does, so an all-padding row gives 0, not NaN.
    return (hidden * mask).sum(1) / jnp.maximum(mask.sum(1), 1e-9)
  return jnp.where(mask > 0, hidden, jnp.finfo(hidden.dtype).min).max(1)


def pool_segments(hidden: jax.Array, segment_ids: jax.Array, num_segments: int,
                  mode: str = "mean") -> jax.Array:
  """Packed rows [B, L, H] with segment ids 1..S (0 = padding) -> [B, S, H].

  Segment s of row b is sentence s of that row. The first token of a segment is its
  [CLS]. Segments that do not occur in a row give zeros (mean, cls) or the dtype's
  minimum (max); callers only read the segments they packed.
  """
  _check_mode(mode)
  segment_ids = jnp.asarray(segment_ids, jnp.int32)
  ids = jnp.arange(1, num_segments + 1, dtype=jnp.int32)
  member = segment_ids[:, None, :] == ids[None, :, None]  # [B, S, L]
  if mode == "max":
    masked = jnp.where(member[..., None], hidden[:, None], jnp.finfo(hidden.dtype).min)
    return masked.max(2)
  if mode == "cls":
    # One-hot of each segment's first position: a member whose left neighbour is not.
    previous = jnp.pad(member, ((0, 0), (0, 0), (1, 0)))[..., :-1]
    weights = (member & ~previous).astype(hidden.dtype)
  else:
    weights = member.astype(hidden.dtype)
    weights = weights / jnp.maximum(weights.sum(-1, keepdims=True), 1e-9)
  return jnp.einsum("bsl,blh->bsh", weights, hidden)


def l2_normalize(x: jax.Array, eps: float = 1e-12) -> jax.Array:
  """x / max(||x||, eps) along the last axis (torch.nn.functional.normalize)."""
  return x / jnp.maximum(jnp.linalg.norm(x, axis=-1, keepdims=True), eps)


def _embed(module: nn.Module, input_ids, attention_mask, token_type_ids, position_ids,
           segment_ids, num_segments: Optional[int], deterministic: bool) -> dict:
  """Shared body of SentenceEncoder and SiameseModel: encoder -> pool -> (normalize)."""
  if attention_mask is None:
    attention_mask = jnp.ones_like(input_ids)
  out = module.encoder(input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids,
                       position_ids=position_ids, segment_ids=segment_ids,
                       deterministic=deterministic)
  hidden = out["last_hidden_state"].astype(jnp.float32)
  if num_segments is None:
    embedding = pool(hidden, attention_mask, module.pooling)
  else:
    if segment_ids is None:
      raise ValueError("num_segments is set but segment_ids is missing: packed rows need "
                       "segment ids 1..num_segments (0 = padding).")
    embedding = pool_segments(hidden, segment_ids, num_segments, module.pooling)
  if module.normalize:
    embedding = l2_normalize(embedding)
  return {"sentence_embedding": embedding, "token_embeddings": hidden}


class SentenceEncoder(nn.Module):
  """encoder -> pool -> (normalize). Params: {'encoder': <the encoder's params>}.

  Outputs `sentence_embedding` [B, H] and `token_embeddings` [B, L, H]. With
  `segment_ids` and `num_segments`, rows are packed sentences and
  `sentence_embedding` is [B, num_segments, H].
  """
  encoder: nn.Module
  pooling: str = "mean"
  normalize: bool = False

  def __post_init__(self):
    _check_mode(self.pooling)
    super().__post_init__()

  def __call__(self, input_ids, attention_mask=None, token_type_ids=None, position_ids=None,
               segment_ids=None, *, num_segments: Optional[int] = None,
               deterministic: bool = True) -> dict:
    return _embed(self, input_ids, attention_mask, token_type_ids, position_ids, segment_ids,
                  num_segments, deterministic)


class SiameseModel(nn.Module):
  """Tied-weight encoder over tuples of sentences: input [B, S, L] -> embeddings [B, S, H].

  S = 2 for pairs, 3 for triplets (anchor, positive, negative), 1 + k for an anchor and
  k candidates. Folding S into the batch runs the one encoder once per step on B * S
  rows, which is both the weight tying and the fastest schedule.

  num_labels > 0 adds SBERT's classification head on pairs: `logits` =
  W [u; v; |u - v|] + b, with u, v the first two sentences' embeddings.
  Params: {'encoder': ..., 'classifier': ...}; the encoder's subtree is laid out exactly
  as in SentenceEncoder, so a trained SiameseModel's params encode directly.

  Packed input (sbert.data.packed_batches): rows input_ids [R, L] holding up to
  `sentences_per_row` sentences each (`segment_ids`, restarting `position_ids`) and
  `sentence_slots` [B, S]; each row's sentences are pooled ([R, sentences_per_row, H]) and
  gathered back to [B, S, H], so everything after the encoder is as unpacked.
  """
  encoder: nn.Module
  pooling: str = "mean"
  normalize: bool = False
  num_labels: int = 0
  sentences_per_row: int = SENTENCES_PER_ROW

  def __post_init__(self):
    _check_mode(self.pooling)
    super().__post_init__()

  @nn.compact
  def __call__(self, input_ids, attention_mask=None, token_type_ids=None, position_ids=None,
               segment_ids=None, sentence_slots=None, *, deterministic: bool = True) -> dict:
    if sentence_slots is not None:
      embeddings = self._packed(input_ids, attention_mask, token_type_ids, position_ids,
                                segment_ids, sentence_slots, deterministic)
    else:
      embeddings = self._folded(input_ids, attention_mask, token_type_ids, position_ids,
                                segment_ids, deterministic)
    num_sentences = embeddings.shape[1]
    result = {"embeddings": embeddings}
    if self.num_labels:
      if num_sentences < 2:
        raise ValueError("The classification head needs pairs: input_ids [batch, 2, length].")
      u, v = embeddings[:, 0], embeddings[:, 1]
      features = jnp.concatenate([u, v, jnp.abs(u - v)], axis=-1)
      result["logits"] = nn.Dense(self.num_labels, name="classifier")(features)
    return result

  def _folded(self, input_ids, attention_mask, token_type_ids, position_ids, segment_ids,
              deterministic: bool) -> jax.Array:
    """[B, S, L] rows, one sentence each -> [B, S, H]."""
    if input_ids.ndim != 3:
      raise ValueError(f"SiameseModel expects input_ids [batch, sentences, length]; got shape "
                       f"{input_ids.shape}. Stack the pair / triplet on axis 1 (or pass packed "
                       "rows [rows, length] with their sentence_slots).")
    batch, num_sentences, length = input_ids.shape
    fold = lambda x: None if x is None else x.reshape(batch * num_sentences, length)
    out = _embed(self, fold(input_ids), fold(attention_mask), fold(token_type_ids),
                 fold(position_ids), fold(segment_ids), None, deterministic)
    return out["sentence_embedding"].reshape(batch, num_sentences, -1)

  def _packed(self, input_ids, attention_mask, token_type_ids, position_ids, segment_ids,
              sentence_slots, deterministic: bool) -> jax.Array:
    """Packed rows [R, L] and sentence_slots [B, S] -> [B, S, H]."""
    if input_ids.ndim != 2 or segment_ids is None or sentence_slots.ndim != 2:
      raise ValueError(
          "Packed SiameseModel input is input_ids [rows, length] with segment_ids and "
          f"sentence_slots [batch, sentences]; got input_ids {input_ids.shape}, segment_ids "
          f"{None if segment_ids is None else segment_ids.shape}, sentence_slots "
          f"{sentence_slots.shape} (sbert.data.packed_batches writes them).")
    out = _embed(self, input_ids, attention_mask, token_type_ids, position_ids, segment_ids,
                 self.sentences_per_row, deterministic)
    pooled = out["sentence_embedding"]  # [R, sentences_per_row, H]
    pooled = pooled.reshape(-1, pooled.shape[-1])
    return jnp.take(pooled, sentence_slots, axis=0)
