"""Sentence-pair classification on [CLS]: BERT's NSP and ALBERT's SOP.

Both are one binary cross-entropy over the sentence-pair logits (BERT's
`seq_relationship_logits`, ALBERT's `sop_logits`); they differ only
in how the data layer builds the pairs (random next segment vs swapped order), so
one objective serves both, named `nsp` or `sop` in the metrics.

`PretrainingObjective` sums several objectives (MLM + NSP for BERT, MLM + SOP for
ALBERT): the model inputs are shared, losses add up with optional weights, and
metrics keep each objective's own names.
"""
import dataclasses
from typing import Optional, Sequence

import gin
import jax.numpy as jnp

from bertjax import batch as contract
from bertjax import outputs as output_contract
from bertjax.objectives import base
from bertjax.objectives.mlm import MaskedLM


@gin.configurable
@dataclasses.dataclass(frozen=True)
class SentencePair:
  """Cross-entropy of `next_sentence_label` (0 = is-next / in order, 1 = random / swapped).

  Padding examples (an all-zero `attention_mask` row, e.g. the fill of a last eval
  batch) carry no weight. logits_key: None (the default) reads the role
  bertjax.outputs.SENTENCE_PAIR_LOGITS (BERT's `seq_relationship_logits`, ALBERT's
  `sop_logits`), whichever the model returned.
  """
  name: str = "nsp"
  logits_key: Optional[str] = None
  label_key: str = "next_sentence_label"
  rng_names: tuple[str, ...] = ()

  def __post_init__(self):
    contract.check((self.label_key,), "SentencePair.label_key")

  def model_inputs(self, batch):
    return contract.select(batch, contract.ENCODER_INPUTS)

  def __call__(self, outputs, batch):
    labels = contract.require(batch, (self.label_key,), "SentencePair")[self.label_key]
    if "attention_mask" in batch:
      weights = (batch["attention_mask"].sum(-1) > 0).astype(jnp.float32)
    else:
      weights = jnp.ones(labels.shape, jnp.float32)
    logits = output_contract.read(
        outputs, (self.logits_key,) if self.logits_key else output_contract.SENTENCE_PAIR_LOGITS,
        "SentencePair")
    loss_sum, correct, count = base.weighted_cross_entropy(logits, labels, weights)
    metrics = {f"{self.name}_loss": (loss_sum, count),
               f"{self.name}_accuracy": (correct, count)}
    return base.safe_mean(loss_sum, count), metrics


@gin.configurable
@dataclasses.dataclass(frozen=True)
class PretrainingObjective:
  """Weighted sum of objectives over one forward pass."""
  objectives: Sequence = (MaskedLM(), SentencePair())
  weights: Sequence[float] | None = None

  @property
  def rng_names(self) -> tuple[str, ...]:
    return tuple(sorted({n for o in self.objectives for n in o.rng_names}))

  def model_inputs(self, batch):
    inputs = {}
    for objective in self.objectives:
      inputs.update(objective.model_inputs(batch))
    return inputs

  def __call__(self, outputs, batch):
    weights = self.weights or (1.0,) * len(self.objectives)
    if len(weights) != len(self.objectives):
      raise ValueError(f"PretrainingObjective.weights has {len(weights)} entries for "
                       f"{len(self.objectives)} objectives.")
    total, metrics = 0.0, {}
    for weight, objective in zip(weights, self.objectives):
      loss, m = objective(outputs, batch)
      total = total + weight * loss
      metrics.update(m)
    return total, metrics


@gin.configurable
def bert_pretraining(sentence_task: str = "nsp") -> PretrainingObjective:
  """BERT: MLM + NSP; `sentence_task='sop'` gives ALBERT's MLM + SOP, None plain MLM."""
  if sentence_task is None:
    return PretrainingObjective((MaskedLM(),))
  if sentence_task not in ("nsp", "sop"):
    raise ValueError(f"bert_pretraining.sentence_task must be 'nsp', 'sop' or None, "
                     f"got {sentence_task!r}.")
  return PretrainingObjective((MaskedLM(), SentencePair(name=sentence_task)))
