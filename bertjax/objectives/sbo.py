"""SpanBERT's span-boundary objective (SBO), and SpanBERT pretraining = MLM + SBO (no NSP).

SBO is a cross-entropy over the same positions and targets as MLM (`mlm_targets`,
`mlm_weights` from span masking), but the logits come from the span's boundary
tokens and the relative position (bertjax.models.spanbert.SpanBoundaryHead), so
the model also reads the boundary features `sbo_left`, `sbo_right`, `sbo_pos`.
"""
import dataclasses
from typing import Optional

import gin

from bertjax import batch as contract
from bertjax.objectives import mlm as mlm_lib
from bertjax.objectives.mlm import MaskedLM
from bertjax.objectives.nsp import PretrainingObjective


@gin.configurable
@dataclasses.dataclass(frozen=True)
class SpanBoundary:
  """Cross-entropy of the SBO head at the masked positions.

  max_predictions: as MaskedLM's: the model gets `masked_positions` [B, max_predictions]
    and runs its SBO head only there; masked tokens beyond it are left out of the loss and
    counted in `<name>_dropped`. Set it to MaskedLM's, so both heads see the same positions.
  """
  logits_key: str = "sbo_logits"
  name: str = "sbo"
  max_predictions: Optional[int] = None
  rng_names: tuple[str, ...] = ()

  def model_inputs(self, batch):
    inputs = {**contract.select(batch, contract.ENCODER_INPUTS),
              **contract.require(batch, contract.SPAN_BOUNDARY, "SpanBoundary",
                                 writer="the 'spanbert' task")}
    return mlm_lib.with_masked_positions(inputs, batch, self.max_predictions)

  def __call__(self, outputs, batch):
    if self.logits_key not in outputs:
      raise ValueError(f"SpanBoundary expects the model output {self.logits_key!r} (e.g. "
                       "SpanBertForPreTraining called with the SBO features); got "
                       f"{sorted(k for k, v in outputs.items() if v is not None)}.")
    scored = mlm_lib.scored_targets(batch, self.max_predictions, self.name, "SpanBoundary",
                                    reads_token=False)
    return mlm_lib.token_cross_entropy(outputs[self.logits_key], scored, self.name)


@gin.configurable
def spanbert_pretraining(sbo_weight: float = 1.0) -> PretrainingObjective:
  """SpanBERT: MLM + SBO, summed (the paper weighs them equally). The SBO head runs at the
  MLM head's positions: SpanBoundary takes MaskedLM.max_predictions."""
  masked_lm = MaskedLM()
  return PretrainingObjective((masked_lm, SpanBoundary(max_predictions=masked_lm.max_predictions)),
                              weights=(1.0, sbo_weight))
