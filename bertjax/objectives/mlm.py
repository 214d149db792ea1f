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
from bertjax import outputs as output_contract
from bertjax.objectives import base


@gin.configurable
@dataclasses.dataclass(frozen=True)
class MaskedLM:
  """Cross-entropy on the masked positions.

  logits_key: the model output holding [B, L, V] token logits; None (the default) reads
    the role bertjax.outputs.MASKED_LM_LOGITS (`prediction_logits` of *ForPreTraining,
    `logits` of *ForMaskedLM), whichever the model returned.
  max_predictions: when set, the model gets `masked_positions` [B, max_predictions] (the
    selected positions first) and returns logits only there, as BERT's
    max_predictions_per_seq; for models whose MLM head takes `masked_positions` (BERT).
    Selected tokens beyond it are left out of the loss and counted in `<name>_dropped`.
  """
  logits_key: Optional[str] = None
  name: str = "mlm"
  max_predictions: Optional[int] = None
  rng_names: tuple[str, ...] = ()

  def model_inputs(self, batch):
    return with_masked_positions(contract.select(batch, contract.ENCODER_INPUTS), batch,
                                 self.max_predictions)

  def __call__(self, outputs, batch):
    logits = output_contract.read(
        outputs, (self.logits_key,) if self.logits_key else output_contract.MASKED_LM_LOGITS,
        "MaskedLM")
    scored = scored_targets(batch, self.max_predictions, self.name, "MaskedLM")
    return token_cross_entropy(logits, scored, self.name)


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
  unseen: `weights` where the input does not show the target token ([MASK] or a random
    token), leaving out the selected tokens kept as they were, which a model can copy; None
    for a head that never reads the token at its position (SpanBERT's SBO).
  metrics: `<name>_dropped` (selected tokens beyond the P gathered) when gathered.
  """
  targets: jax.Array
  weights: jax.Array
  unseen: Optional[jax.Array]
  positions: Optional[jax.Array]
  metrics: dict


def with_masked_positions(inputs: dict, batch, max_predictions: Optional[int]) -> dict:
  """`inputs` plus `masked_positions` for a model whose head runs there only."""
  if max_predictions is not None:
    inputs["masked_positions"] = masked_positions(batch["mlm_weights"], max_predictions)
  return inputs


def scored_targets(batch, max_predictions: Optional[int], name: str, reader: str,
                   reads_token: bool = True) -> ScoredTargets:
  """The batch's `mlm_targets` / `mlm_weights`, gathered at the positions
  `with_masked_positions` gave the model when `max_predictions` is set. `reads_token`: the
  head sees the input token at its position, so `unseen` is worth splitting out."""
  mlm = contract.require(batch, contract.MLM, reader)
  targets, weights = mlm["mlm_targets"], mlm["mlm_weights"]
  shown = contract.require(batch, ("input_ids",), reader)["input_ids"] if reads_token else None
  positions, metrics = None, {}
  if max_predictions is not None:
    positions = masked_positions(weights, max_predictions)
    targets, weights, metrics[f"{name}_dropped"] = gather_targets(targets, weights, positions)
    if shown is not None:
      shown = jnp.take_along_axis(shown, positions, axis=1)
  unseen = None if shown is None else weights * (shown != targets)
  return ScoredTargets(targets, weights, unseen, positions, metrics)


def token_cross_entropy(logits: jax.Array, scored: ScoredTargets, name: str):
  """(mean cross-entropy, metrics): `<name>_loss` and `<name>_accuracy` over every scored
  token, `<name>_unseen_loss` / `_accuracy` over those the input hid (so copying the kept
  ones does not count), and the drop count."""
  nll, correct = base.token_nll_and_correct(logits, scored.targets)
  weights = scored.weights.astype(jnp.float32)
  loss_sum, count = (nll * weights).sum(), weights.sum()
  metrics = {**scored.metrics, f"{name}_loss": (loss_sum, count),
             f"{name}_accuracy": ((correct * weights).sum(), count)}
  if scored.unseen is not None:
    unseen = scored.unseen.astype(jnp.float32)
    metrics[f"{name}_unseen_loss"] = ((nll * unseen).sum(), unseen.sum())
    metrics[f"{name}_unseen_accuracy"] = ((correct * unseen).sum(), unseen.sum())
  return base.safe_mean(loss_sum, count), metrics
