"""Sentence-embedding objectives for `SiameseModel` (Reimers & Gurevych, 2019; Henderson
et al., 2017).

Batch features: `input_ids`, `attention_mask` (and optionally `token_type_ids`) of
shape [B, S, L], the S sentences of each example stacked on axis 1, plus
  classification: `label` [B] int (NLI: 0 entailment, 1 neutral, 2 contradiction);
  cosine regression: `score` [B] float, the gold similarity scaled to [0, 1] (or [-1, 1]);
  triplet: nothing (S = 3: anchor, positive, negative);
  in-batch negatives: nothing (S = 2: anchor, positive, or S > 2 with hard negatives).
An optional `weight` [B] masks padding examples out of every loss (default: all 1).
"""
import dataclasses
from typing import Mapping

import jax
import jax.numpy as jnp
import optax

from bertjax import batch as contract
from bertjax.objectives.base import Array, Metrics, safe_mean


def _weights(batch: Mapping[str, Array], size: int) -> Array:
  weight = batch.get("weight")
  return jnp.ones((size,), jnp.float32) if weight is None else weight.astype(jnp.float32)


def cosine_similarity(u: Array, v: Array, eps: float = 1e-8) -> Array:
  """Row-wise cosine along the last axis (torch's eps convention)."""
  norms = jnp.maximum(jnp.linalg.norm(u, axis=-1), eps) * jnp.maximum(
      jnp.linalg.norm(v, axis=-1), eps)
  return (u * v).sum(-1) / norms


class _SiameseObjective:
  rng_names: tuple[str, ...] = ()

  def model_inputs(self, batch: Mapping[str, Array]) -> dict:
    return contract.select(batch, contract.SIAMESE_INPUTS)


@dataclasses.dataclass(frozen=True)
class SoftmaxLoss(_SiameseObjective):
  """SBERT's NLI objective: cross-entropy of softmax(W [u; v; |u - v|]) (model's `logits`)."""

  def __call__(self, outputs, batch) -> tuple[Array, Metrics]:
    logits = outputs["logits"].astype(jnp.float32)
    weight = _weights(batch, logits.shape[0])
    label = contract.require(batch, ("label",), "SoftmaxLoss",
                             writer="sbert.data.Examples(label=...)")["label"]
    nll = optax.softmax_cross_entropy_with_integer_labels(logits, label)
    correct = (jnp.argmax(logits, -1) == label).astype(jnp.float32)
    loss_sum, count = (nll * weight).sum(), weight.sum()
    return safe_mean(loss_sum, count), {"loss": (loss_sum, count),
                                        "accuracy": ((correct * weight).sum(), count)}


@dataclasses.dataclass(frozen=True)
class CosineSimilarityLoss(_SiameseObjective):
  """SBERT's STS objective: MSE between cos(u, v) and the gold `score`."""

  def __call__(self, outputs, batch) -> tuple[Array, Metrics]:
    embeddings = outputs["embeddings"].astype(jnp.float32)
    cosine = cosine_similarity(embeddings[:, 0], embeddings[:, 1])
    weight = _weights(batch, cosine.shape[0])
    score = contract.require(batch, ("score",), "CosineSimilarityLoss",
                             writer="sbert.data.Examples(score=...)")["score"]
    squared = jnp.square(cosine - score.astype(jnp.float32))
    loss_sum, count = (squared * weight).sum(), weight.sum()
    return safe_mean(loss_sum, count), {"loss": (loss_sum, count)}


@dataclasses.dataclass(frozen=True)
class TripletLoss(_SiameseObjective):
  """max(||a - p|| - ||a - n|| + margin, 0) with Euclidean distance (SBERT: margin 1)."""
  margin: float = 1.0

  def __call__(self, outputs, batch) -> tuple[Array, Metrics]:
    embeddings = outputs["embeddings"].astype(jnp.float32)
    anchor, positive, negative = embeddings[:, 0], embeddings[:, 1], embeddings[:, 2]
    # sqrt of a clamped square: the gradient stays finite when a == p exactly.
    distance = lambda x, y: jnp.sqrt(jnp.maximum(jnp.square(x - y).sum(-1), 1e-12))
    gap = distance(anchor, positive) - distance(anchor, negative)
    losses = jax.nn.relu(gap + self.margin)
    weight = _weights(batch, losses.shape[0])
    loss_sum, count = (losses * weight).sum(), weight.sum()
    return safe_mean(loss_sum, count), {
        "loss": (loss_sum, count), "accuracy": (((gap < 0) * weight).sum(), count)}


@dataclasses.dataclass(frozen=True)
class MultipleNegativesRankingLoss(_SiameseObjective):
  """In-batch negatives (sentence-transformers' MultipleNegativesRankingLoss).

  Anchor i must pick its own positive among all B positives (and all hard negatives
  when S > 2) of the batch: cross-entropy over scale * cos(anchor_i, candidate_j).
  Masked-out examples (weight 0) neither count as anchors nor as candidates.
  """
  scale: float = 20.0

  def __call__(self, outputs, batch) -> tuple[Array, Metrics]:
    embeddings = outputs["embeddings"].astype(jnp.float32)
    batch_size = embeddings.shape[0]
    anchors = embeddings[:, 0]
    # Candidates ordered [positives of all examples, then first hard negatives, ...] so
    # the target of anchor i is column i.
    candidates = jnp.swapaxes(embeddings[:, 1:], 0, 1).reshape(-1, embeddings.shape[-1])
    normalize = lambda x: x / jnp.maximum(jnp.linalg.norm(x, axis=-1, keepdims=True), 1e-8)
    scores = self.scale * normalize(anchors) @ normalize(candidates).T
    weight = _weights(batch, batch_size)
    valid = jnp.tile(weight > 0, embeddings.shape[1] - 1)
    scores = jnp.where(valid[None, :], scores, -1e9)
    targets = jnp.arange(batch_size)
    nll = optax.softmax_cross_entropy_with_integer_labels(scores, targets)
    correct = (jnp.argmax(scores, -1) == targets).astype(jnp.float32)
    loss_sum, count = (nll * weight).sum(), weight.sum()
    return safe_mean(loss_sum, count), {"loss": (loss_sum, count),
                                        "accuracy": ((correct * weight).sum(), count)}
