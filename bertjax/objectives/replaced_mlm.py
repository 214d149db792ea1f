"""Replace MLM and All-Tokens MLM, ELECTRA's Table 5 ablations (Clark et al., 2020, sec. 3.2).

The generator is ELECTRA's, trained on its own MLM loss; the network in the discriminator's
place (`ElectraReplacedMLM` / `ElectraAllTokensMLM`) reads the corrupted input (the masked
positions hold generator samples, never [MASK]) and predicts the original tokens:

  L = generator_weight * L_MLM(generator) + mlm_weight * L_MLM(network)

Replace MLM scores the network on the masked positions only (`mlm_targets` /
`mlm_weights`, as BERT's MLM). All-Tokens MLM scores it on every real token, with the
paper's copy mechanism: the token's probability is
  D * [original == input] + (1 - D) * softmax(logits)[original],   D = sigmoid(copy_logit)
so a token left as it was can be copied, and a replaced one must come from the softmax.
Both terms are cross-entropies of the same scale, so the network's weight is 1 (ELECTRA's
50 offsets a binary loss much smaller than an MLM's).

`max_predictions` runs the vocabulary heads scored at the masked positions only there, up
to that many a sequence, as ELECTRA's own code does for all its ablations: the generator's
(and its sampling), and Replace MLM's network head. Selected tokens beyond it keep their
original token and are left out of both MLM losses (`mlm_dropped`). All-Tokens MLM's
network still predicts every position.
"""
import dataclasses
from typing import Optional

import gin
import jax
import jax.numpy as jnp

from bertjax import batch as contract
from bertjax.objectives import base, mlm as mlm_objective
from bertjax.objectives.rtd import token_weights


def copy_mixture_loss(logits, copy_logits, input_ids, targets, weights):
  """(loss_sum, correct_sum, weight_sum) of -log p(target) under the copy mixture
  D * onehot(input) + (1 - D) * softmax(logits), in float32."""
  logits = logits.astype(jnp.float32)
  copy_logits = copy_logits.astype(jnp.float32)
  weights = weights.astype(jnp.float32)
  log_probs = jax.nn.log_softmax(logits, axis=-1)
  from_softmax = jax.nn.log_sigmoid(-copy_logits) + jnp.take_along_axis(
      log_probs, targets[..., None].astype(jnp.int32), -1)[..., 0]
  copyable = input_ids == targets
  log_p = jnp.where(copyable, jnp.logaddexp(jax.nn.log_sigmoid(copy_logits), from_softmax),
                    from_softmax)
  gate = jax.nn.sigmoid(copy_logits)[..., None]
  mixture = (1.0 - gate) * jnp.exp(log_probs) + gate * jax.nn.one_hot(
      input_ids, logits.shape[-1], dtype=jnp.float32)
  correct = (jnp.argmax(mixture, -1) == targets).astype(jnp.float32)
  return (-log_p * weights).sum(), (correct * weights).sum(), weights.sum()


@gin.configurable
@dataclasses.dataclass(frozen=True)
class ReplacedMLM:
  """Replace MLM (`all_tokens=False`) or All-Tokens MLM (`all_tokens=True`, which needs
  the model's `copy_logits`: ElectraAllTokensMLM).

  max_predictions: when set, the heads scored at the masked positions run at most this
    many a sequence (the model gets `masked_positions`); None runs them everywhere.
  Metrics: mlm_loss / mlm_accuracy (the generator, on the masked positions; with
  mlm_unseen_* and mlm_dropped as BERT's MLM) and replaced_mlm_loss / replaced_mlm_accuracy
  (the network, on the positions it is scored on).
  """
  all_tokens: bool = False
  generator_weight: float = 1.0
  mlm_weight: float = 1.0
  max_predictions: Optional[int] = None
  rng_names: tuple[str, ...] = ("sample",)

  def model_inputs(self, batch):
    inputs = {**contract.select(batch, contract.ENCODER_INPUTS),
              **contract.require(batch, contract.MLM, "ReplacedMLM")}
    return mlm_objective.with_masked_positions(inputs, batch, self.max_predictions)

  def __call__(self, outputs, batch):
    needed = ("generator_logits", "logits", "corrupted_ids") + (
        ("copy_logits",) if self.all_tokens else ())
    for key in needed:
      if key not in outputs:
        model = "ElectraAllTokensMLM" if self.all_tokens else "ElectraReplacedMLM"
        raise ValueError(f"ReplacedMLM(all_tokens={self.all_tokens}) needs the model output "
                         f"{key!r}; use bertjax.models.electra.{model}.")
    scored = mlm_objective.scored_targets(batch, self.max_predictions, "mlm", "ReplacedMLM")
    generator_loss, metrics = mlm_objective.token_cross_entropy(outputs["generator_logits"],
                                                                scored, "mlm")
    if self.all_tokens:
      mlm = contract.require(batch, contract.MLM, "ReplacedMLM")
      originals = jnp.where(mlm["mlm_weights"] > 0, mlm["mlm_targets"], batch["input_ids"])
      net_sum, net_correct, net_count = copy_mixture_loss(
          outputs["logits"], outputs["copy_logits"], outputs["corrupted_ids"], originals,
          token_weights(batch))
    else:
      net_sum, net_correct, net_count = base.weighted_cross_entropy(
          outputs["logits"], scored.targets, scored.weights)
    loss = (self.generator_weight * generator_loss
            + self.mlm_weight * base.safe_mean(net_sum, net_count))
    metrics.update({"replaced_mlm_loss": (net_sum, net_count),
                    "replaced_mlm_accuracy": (net_correct, net_count)})
    return loss, metrics
