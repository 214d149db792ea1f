"""Masked language modelling (BERT, RoBERTa, ALBERT, ELECTRA's generator...).

The data layer has already chosen the positions: `mlm_targets` holds the original
token id where a position was selected and `mlm_weights` is 1.0 there. The loss is
the cross-entropy over selected positions only, averaged over their count.
"""
import dataclasses
from typing import Mapping

import gin

from bertjax.objectives import base

# The batch features every encoder takes (see the batch contract in the brief).
ENCODER_INPUTS = ("input_ids", "attention_mask", "token_type_ids", "position_ids", "segment_ids")


def encoder_inputs(batch: Mapping[str, base.Array]) -> dict[str, base.Array]:
  """The encoder features present in `batch`, as keyword arguments for the module."""
  return {k: batch[k] for k in ENCODER_INPUTS if k in batch}


@gin.configurable
@dataclasses.dataclass(frozen=True)
class MaskedLM:
  """Cross-entropy on the masked positions.

  logits_key: the model output holding [B, L, V] token logits
    (`prediction_logits` for *ForPreTraining, `logits` for *ForMaskedLM).
  """
  logits_key: str = "prediction_logits"
  name: str = "mlm"
  rng_names: tuple[str, ...] = ()

  def model_inputs(self, batch):
    return encoder_inputs(batch)

  def __call__(self, outputs, batch):
    if self.logits_key not in outputs:
      raise ValueError(f"MaskedLM expects the model output {self.logits_key!r}; the model "
                       f"returned {sorted(k for k, v in outputs.items() if v is not None)}. "
                       f"Set MaskedLM.logits_key in gin.")
    loss_sum, correct, count = base.weighted_cross_entropy(
        outputs[self.logits_key], batch["mlm_targets"], batch["mlm_weights"])
    metrics = {f"{self.name}_loss": (loss_sum, count),
               f"{self.name}_accuracy": (correct, count)}
    return base.safe_mean(loss_sum, count), metrics
