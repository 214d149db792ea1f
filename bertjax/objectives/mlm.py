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
    inputs = contract.select(batch, contract.ENCODER_INPUTS)
    if self.max_predictions is not None:
      inputs["masked_positions"] = self._positions(batch)
    return inputs

  def _positions(self, batch):
    # top_k on 0/1 weights: every selected position ranks before every unselected one.
    # (Sequences shorter than max_predictions have all their positions gathered.)
    k = min(self.max_predictions, batch["mlm_weights"].shape[-1])
    return jax.lax.top_k(batch["mlm_weights"], k)[1]

  def __call__(self, outputs, batch):
    if self.logits_key not in outputs:
      raise ValueError(f"MaskedLM expects the model output {self.logits_key!r}; the model "
                       f"returned {sorted(k for k, v in outputs.items() if v is not None)}. "
                       f"Set MaskedLM.logits_key in gin.")
    mlm = contract.require(batch, contract.MLM, "MaskedLM")
    targets, weights = mlm["mlm_targets"], mlm["mlm_weights"]
    metrics = {}
    if self.max_predictions is not None:
      positions = self._positions(batch)
      targets = jnp.take_along_axis(targets, positions, axis=1)
      weights = jnp.take_along_axis(weights, positions, axis=1)
      metrics[f"{self.name}_dropped"] = (batch["mlm_weights"].sum() - weights.sum(),
                                         jnp.asarray(1.0))
    loss_sum, correct, count = base.weighted_cross_entropy(outputs[self.logits_key], targets,
                                                           weights)
    metrics.update({f"{self.name}_loss": (loss_sum, count),
                    f"{self.name}_accuracy": (correct, count)})
    return base.safe_mean(loss_sum, count), metrics
