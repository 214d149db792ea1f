"""Fine-tuning losses, as objectives (`bertjax.objectives.base.Objective` contract).

Each says which batch features feed the model and turns its outputs into a mean loss
plus `(sum, count)` metrics. An optional per-example `weights` feature (1 = real,
0 = padding row) lets a final partial batch be padded to a fixed shape.
"""
from typing import Mapping

import jax
import jax.numpy as jnp

from bertjax import batch as contract
from bertjax.objectives.base import safe_mean, weighted_cross_entropy


class _FineTuneObjective:
  rng_names: tuple[str, ...] = ()

  def model_inputs(self, batch: Mapping[str, jax.Array]) -> dict[str, jax.Array]:
    return contract.select(batch, contract.TASK_INPUTS)

  @staticmethod
  def example_weights(batch: Mapping[str, jax.Array]) -> jax.Array:
    if "weights" in batch:
      return batch["weights"].astype(jnp.float32)
    return jnp.ones(batch["input_ids"].shape[0], jnp.float32)


class Classification(_FineTuneObjective):
  """Softmax cross-entropy of `logits` [B, K] against `labels` [B] (GLUE, SWAG's choices)."""

  def __call__(self, outputs, batch):
    weights = self.example_weights(batch)
    labels = contract.require(batch, ("labels",), "Classification")["labels"]
    loss, correct, count = weighted_cross_entropy(outputs["logits"], labels, weights)
    return safe_mean(loss, count), {"loss": (loss, count), "accuracy": (correct, count)}


class Regression(_FineTuneObjective):
  """Mean squared error of the single output against (score - center) / scale (STS-B)."""

  def __init__(self, center: float = 0.0, scale: float = 1.0):
    self.center, self.scale = center, scale

  def __call__(self, outputs, batch):
    weights = self.example_weights(batch)
    labels = contract.require(batch, ("labels",), "Regression")["labels"]
    target = (labels.astype(jnp.float32) - self.center) / self.scale
    error = outputs["logits"][..., 0].astype(jnp.float32) - target
    loss, count = (weights * error**2).sum(), weights.sum()
    return safe_mean(loss, count), {"loss": (loss, count)}


class SpanExtraction(_FineTuneObjective):
  """SQuAD: mean of the start and end position cross-entropies over the sequence.

  Packed rows (positions [R, E], one per example slot, with `segment_ids`): each
  example's softmax runs over its own tokens only."""

  def __call__(self, outputs, batch):
    weights = self.example_weights(batch)
    spans = contract.require(batch, contract.SPAN_TARGETS, "SpanExtraction")
    logits = {k: outputs[k] for k in ("start_logits", "end_logits")}
    if spans["start_positions"].ndim == 2:
      segments = contract.require(batch, ("segment_ids",), "SpanExtraction of packed rows")
      logits = {k: per_example_logits(v, segments["segment_ids"],
                                      spans["start_positions"].shape[1])
                for k, v in logits.items()}
    start, start_ok, count = weighted_cross_entropy(logits["start_logits"],
                                                    spans["start_positions"], weights)
    end, end_ok, _ = weighted_cross_entropy(logits["end_logits"], spans["end_positions"],
                                            weights)
    loss = (start + end) / 2
    return safe_mean(loss, count), {"loss": (loss, count),
                                    "start_accuracy": (start_ok, count),
                                    "end_accuracy": (end_ok, count)}


def per_example_logits(logits: jax.Array, segment_ids: jax.Array, slots: int) -> jax.Array:
  """Token logits of packed rows [R, L] -> [R, E, L]: example slot e's, with every token
  outside it (segment e + 1) at a large negative value."""
  member = segment_ids[:, None, :] == jnp.arange(1, slots + 1)[None, :, None]
  return jnp.where(member, logits[:, None, :].astype(jnp.float32), -1e9)


class TokenClassification(_FineTuneObjective):
  """NER: cross-entropy at the tokens with `label_weights` 1 (each word's first piece)."""

  def __call__(self, outputs, batch):
    targets = contract.require(batch, contract.TARGETS, "TokenClassification")
    weights = targets["label_weights"].astype(jnp.float32) * self.example_weights(batch)[:, None]
    loss, correct, count = weighted_cross_entropy(outputs["logits"], targets["labels"], weights)
    return safe_mean(loss, count), {"loss": (loss, count), "accuracy": (correct, count)}
