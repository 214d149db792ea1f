"""The contract between a model, its batch and the trainer.

An objective says which batch features feed the model (`model_inputs`), which extra
random streams the model draws from (`rng_names`, beyond 'dropout'), and turns the
model's outputs into a scalar loss plus metrics.

Metrics are `(sum, count)` pairs rather than means, so the trainer can add them up
over microbatches, steps and hosts and divide once: the mean of means is wrong when
microbatches carry different numbers of masked tokens.
"""
from typing import Any, Mapping, Protocol

import jax
import jax.numpy as jnp

Array = Any
Metrics = dict[str, tuple[Array, Array]]


class Objective(Protocol):
  rng_names: tuple[str, ...]

  def model_inputs(self, batch: Mapping[str, Array]) -> dict[str, Array]:
    ...

  def __call__(self, outputs: Mapping[str, Array],
               batch: Mapping[str, Array]) -> tuple[Array, Metrics]:
    ...


def weighted_cross_entropy(logits: Array, targets: Array,
                           weights: Array) -> tuple[Array, Array, Array]:
  """Token cross-entropy in float32.

  Returns (loss_sum, correct_sum, weight_sum) so callers can build both the mean loss
  and `(sum, count)` metrics without recomputing.
  """
  nll, correct = token_nll_and_correct(logits, targets)
  weights = weights.astype(jnp.float32)
  return (nll * weights).sum(), (correct * weights).sum(), weights.sum()


def token_nll_and_correct(logits: Array, targets: Array) -> tuple[Array, Array]:
  """Per token: the negative log-likelihood of the target, and 1.0 where it is the argmax."""
  # logsumexp - target logit, never the [..., vocab] log-probabilities: over BERT's 30k
  # vocabulary at every position that array is a step's largest, and writing it out and
  # reading it back cost ~20% of the MLM head's time. (The argmax stays: with tied top scores
  # only the first counts, so a head whose scores are all equal is not "always right".)
  if logits.shape[:-1] != targets.shape:
    raise ValueError(f"Logits {logits.shape} do not match targets {targets.shape}. A head run "
                     "only at `masked_positions` needs the max_predictions of every objective "
                     "reading it set alike (MaskedLM, SpanBoundary, ReplacedTokenDetection).")
  logits = logits.astype(jnp.float32)
  target_logit = jnp.take_along_axis(logits, targets[..., None].astype(jnp.int32), -1)[..., 0]
  nll = jax.nn.logsumexp(logits, axis=-1) - target_logit
  return nll, (jnp.argmax(logits, -1) == targets).astype(jnp.float32)


def safe_mean(total: Array, count: Array) -> Array:
  """total / count, and 0 where nothing was counted (e.g. a batch with no masked token)."""
  return total / jnp.maximum(count, 1e-9)
