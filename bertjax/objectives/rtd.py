"""ELECTRA's objective: generator MLM + lambda * replaced-token detection (Clark et al., 2020).

    L = generator_weight * L_MLM + discriminator_weight * L_Disc,   lambda = 50

L_MLM is the generator's cross-entropy on the masked positions (`mlm_targets` /
`mlm_weights`, as for BERT); L_Disc the discriminator's sigmoid cross-entropy on
every real token (`attention_mask`; packing padding, segment 0, excluded too). The
model (`ElectraGeneratorDiscriminator`) samples the replacements itself from the
'sample' RNG stream, with no gradient through the sampling, so only L_MLM trains the
generator's own weights (the shared embeddings get both).

`max_predictions` runs the generator's head (and its sampling over the vocabulary) only
at the selected positions, up to that many a sequence, as ELECTRA's own code does
(max_predictions_per_seq, 19 for ELECTRA-Small at 128 tokens). Selected tokens beyond
it are left out of L_MLM, keep their original token, and are counted in `mlm_dropped`.

ELECTRA 15% (the paper's Table 5) is `detect_on='masked'`: L_Disc over the masked
positions only (the 15% the generator filled in), the rest of the input unscored.

Two-stage ELECTRA is the same objective with other weights: stage one
`discriminator_weight=0` (generator only), stage two `generator_weight=0` with the
generator frozen in the optimizer (see gin/objectives/electra_two_stage_*.gin).
"""
import dataclasses
from typing import Optional

import gin
import jax.numpy as jnp
import optax

from bertjax import batch as contract
from bertjax.objectives import base, mlm as mlm_objective


def token_weights(batch) -> jnp.ndarray:
  """1.0 on real tokens: attention_mask, and segment_ids > 0 when packed."""
  ids = batch["input_ids"]
  weights = jnp.ones(ids.shape, jnp.float32)
  if "attention_mask" in batch:
    weights = weights * (batch["attention_mask"] > 0)
  if "segment_ids" in batch:
    weights = weights * (batch["segment_ids"] > 0)
  return weights


def detection_loss(logits, labels, weights):
  """(loss_sum, correct_sum, weight_sum, replaced-and-detected sum, replaced sum) of the
  per-token sigmoid cross-entropy, in float32."""
  logits = logits.astype(jnp.float32)
  labels = labels.astype(jnp.float32)
  nll = optax.sigmoid_binary_cross_entropy(logits, labels)
  predicted = (logits > 0).astype(jnp.float32)
  correct = (predicted == labels).astype(jnp.float32)
  replaced = labels * weights
  return ((nll * weights).sum(), (correct * weights).sum(), weights.sum(),
          (predicted * replaced).sum(), replaced.sum())


@gin.configurable
@dataclasses.dataclass(frozen=True)
class ReplacedTokenDetection:
  """ELECTRA's joint loss over `ElectraGeneratorDiscriminator` outputs.

  detect_on: 'all' real tokens (ELECTRA) or only the 'masked' ones (ELECTRA 15%).
  max_predictions: when set, the generator runs at most this many masked positions a
    sequence (the model gets `masked_positions`); None scores every position.
  Metrics: mlm_loss / mlm_accuracy (generator), rtd_loss / rtd_accuracy (the detected
  tokens), rtd_recall (replaced tokens caught) and rtd_replaced (fraction replaced).
  """
  generator_weight: float = 1.0
  discriminator_weight: float = 50.0
  detect_on: str = "all"
  max_predictions: Optional[int] = None
  rng_names: tuple[str, ...] = ("sample",)

  def __post_init__(self):
    if self.detect_on not in ("all", "masked"):
      raise ValueError(f"ReplacedTokenDetection.detect_on = {self.detect_on!r}: use 'all' "
                       "(ELECTRA) or 'masked' (ELECTRA 15%).")

  def model_inputs(self, batch):
    inputs = {**contract.select(batch, contract.ENCODER_INPUTS),
              **contract.require(batch, contract.MLM, "ReplacedTokenDetection")}
    return mlm_objective.with_masked_positions(inputs, batch, self.max_predictions)

  def __call__(self, outputs, batch):
    for key in ("generator_logits", "discriminator_logits", "replaced"):
      if key not in outputs:
        raise ValueError(f"ReplacedTokenDetection needs the model output {key!r}; use "
                         "bertjax.models.electra.ElectraGeneratorDiscriminator.")
    scored = mlm_objective.scored_targets(batch, self.max_predictions, "mlm",
                                          "ReplacedTokenDetection")
    mlm_loss, metrics = mlm_objective.token_cross_entropy(outputs["generator_logits"], scored,
                                                          "mlm")
    weights = token_weights(batch)
    if self.detect_on == "masked":
      weights = weights * sampled_from(scored, weights.shape)
    rtd_sum, rtd_correct, count, caught, replaced = detection_loss(
        outputs["discriminator_logits"], outputs["replaced"], weights)
    loss = (self.generator_weight * mlm_loss
            + self.discriminator_weight * base.safe_mean(rtd_sum, count))
    metrics.update({"rtd_loss": (rtd_sum, count), "rtd_accuracy": (rtd_correct, count),
                    "rtd_recall": (caught, replaced), "rtd_replaced": (replaced, count)})
    return loss, metrics


def sampled_from(scored: mlm_objective.ScoredTargets, shape) -> jnp.ndarray:
  """[B, L] 1.0 where the generator sampled a replacement: the masked positions, or,
  when gathered, those among the gathered ones."""
  if scored.positions is None:
    return (scored.weights > 0).astype(jnp.float32)
  rows = jnp.arange(shape[0])[:, None]
  return jnp.zeros(shape, jnp.float32).at[rows, scored.positions].set(scored.weights > 0)
