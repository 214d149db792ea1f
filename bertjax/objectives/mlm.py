"""Masked language modelling (BERT, RoBERTa, ALBERT, ELECTRA's generator...).

The data layer has already chosen the positions: `mlm_targets` holds the original
token id where a position was selected and `mlm_weights` is 1.0 there. The loss is
the cross-entropy over selected positions only, averaged over their count.
"""
import dataclasses
from typing import Optional

import gin
import jax
import jax.numpy as jnp

from bertjax import batch as contract
from bertjax.objectives import base


@gin.configurable
@dataclasses.dataclass(frozen=True)
class MaskedLM:
  """Cross-entropy on the masked positions.

  logits_key: the model output holding [B, L, V] token logits
    (`prediction_logits` for *ForPreTraining, `logits` for *ForMaskedLM).
  max_predictions: when set, the model gets `masked_positions` [B, max_predictions] (the
    selected positions first) and returns logits only there, as BERT's
    max_predictions_per_seq; for models whose MLM head takes `masked_positions` (BERT).
    Selected tokens beyond it are left out of the loss and counted in `<name>_dropped`.
  """
  logits_key: str = "prediction_logits"
  name: str = "mlm"
  max_predictions: Optional[int] = None
  rng_names: tuple[str, ...] = ()

  def model_inputs(self, batch):
    return with_masked_positions(contract.select(batch, contract.ENCODER_INPUTS), batch,
                                 self.max_predictions)

  def __call__(self, outputs, batch):
    if self.logits_key not in outputs:
      raise ValueError(f"MaskedLM expects the model output {self.logits_key!r}; the model "
                       f"returned {sorted(k for k, v in outputs.items() if v is not None)}. "
                       f"Set MaskedLM.logits_key in gin.")
    scored = scored_targets(batch, self.max_predictions, self.name, "MaskedLM")
    return token_cross_entropy(outputs[self.logits_key], scored, self.name)


def masked_positions(mlm_weights: jax.Array, max_predictions: int) -> jax.Array:
  """[B, min(max_predictions, L)] positions, the selected ones (weight > 0) first.

  top_k on 0/1 weights ranks every selected position before every unselected one;
  sequences shorter than max_predictions have all their positions gathered."""
  k = min(max_predictions, mlm_weights.shape[-1])
  return jax.lax.top_k(mlm_weights, k)[1]


def gather_targets(targets: jax.Array, weights: jax.Array, positions: jax.Array):
  """(targets, weights) at `positions`, and the `dropped` metric: how many selected
  tokens fell beyond them (left out of the loss), as a (sum, 1) pair."""
  gathered = jnp.take_along_axis(weights, positions, axis=1)
  dropped = (weights.sum() - gathered.sum(), jnp.asarray(1.0))
  return jnp.take_along_axis(targets, positions, axis=1), gathered, dropped


# ------------------------------------------------ shared by every head scored at the masks
@dataclasses.dataclass(frozen=True)
class ScoredTargets:
  """What a head at the masked positions is scored against.

  targets, weights: [B, L], or [B, P] at `positions` [B, P] when gathered
    (max_predictions); positions is None otherwise.
  metrics: `<name>_dropped` (selected tokens beyond the P gathered) when gathered.
  """
  targets: jax.Array
  weights: jax.Array
  positions: Optional[jax.Array]
  metrics: dict


def with_masked_positions(inputs: dict, batch, max_predictions: Optional[int]) -> dict:
  """`inputs` plus `masked_positions` for a model whose head runs there only."""
  if max_predictions is not None:
    inputs["masked_positions"] = masked_positions(batch["mlm_weights"], max_predictions)
  return inputs


def scored_targets(batch, max_predictions: Optional[int], name: str,
                   reader: str) -> ScoredTargets:
  """The batch's `mlm_targets` / `mlm_weights`, gathered at the positions
  `with_masked_positions` gave the model when `max_predictions` is set."""
  mlm = contract.require(batch, contract.MLM, reader)
  targets, weights = mlm["mlm_targets"], mlm["mlm_weights"]
  if max_predictions is None:
    return ScoredTargets(targets, weights, None, {})
  positions = masked_positions(weights, max_predictions)
  targets, gathered, dropped = gather_targets(targets, weights, positions)
  return ScoredTargets(targets, gathered, positions, {f"{name}_dropped": dropped})


def token_cross_entropy(logits: jax.Array, scored: ScoredTargets, name: str):
  """(mean cross-entropy, metrics): `<name>_loss`, `<name>_accuracy` and the drop count."""
  loss_sum, correct, count = base.weighted_cross_entropy(logits, scored.targets, scored.weights)
  metrics = {**scored.metrics, f"{name}_loss": (loss_sum, count),
             f"{name}_accuracy": (correct, count)}
  return base.safe_mean(loss_sum, count), metrics
