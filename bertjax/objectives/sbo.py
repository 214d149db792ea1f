"""SpanBERT's span-boundary objective (SBO), and SpanBERT pretraining = MLM + SBO (no NSP).

SBO is a cross-entropy over the same positions and targets as MLM (`mlm_targets`,
`mlm_weights` from span masking), but the logits come from the span's boundary
tokens and the relative position (bertjax.models.spanbert.SpanBoundaryHead), so
the model also reads the boundary features `sbo_left`, `sbo_right`, `sbo_pos`.
"""
import dataclasses

import gin

from bertjax import batch as contract
from bertjax.objectives import base
from bertjax.objectives.mlm import MaskedLM
from bertjax.objectives.nsp import PretrainingObjective


@gin.configurable
@dataclasses.dataclass(frozen=True)
class SpanBoundary:
  logits_key: str = "sbo_logits"
  name: str = "sbo"
  rng_names: tuple[str, ...] = ()

  def model_inputs(self, batch):
    return {**contract.select(batch, contract.ENCODER_INPUTS),
            **contract.require(batch, contract.SPAN_BOUNDARY, "SpanBoundary",
                               writer="the 'spanbert' task")}

  def __call__(self, outputs, batch):
    if self.logits_key not in outputs:
      raise ValueError(f"SpanBoundary expects the model output {self.logits_key!r} (e.g. "
                       "SpanBertForPreTraining called with the SBO features); got "
                       f"{sorted(k for k, v in outputs.items() if v is not None)}.")
    mlm = contract.require(batch, contract.MLM, "SpanBoundary")
    loss_sum, correct, count = base.weighted_cross_entropy(
        outputs[self.logits_key], mlm["mlm_targets"], mlm["mlm_weights"])
    metrics = {f"{self.name}_loss": (loss_sum, count), f"{self.name}_accuracy": (correct, count)}
    return base.safe_mean(loss_sum, count), metrics


@gin.configurable
def spanbert_pretraining(sbo_weight: float = 1.0) -> PretrainingObjective:
  """SpanBERT: MLM + SBO, summed (the paper weighs them equally)."""
  return PretrainingObjective((MaskedLM(), SpanBoundary()), weights=(1.0, sbo_weight))
