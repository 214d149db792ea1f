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
"""
import dataclasses

import gin
import jax
import jax.numpy as jnp

from bertjax import batch as contract
from bertjax.objectives import base
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

  Metrics: mlm_loss / mlm_accuracy (the generator, on the masked positions) and
  replaced_mlm_loss / replaced_mlm_accuracy (the network, on the positions it is scored on).
  """
  all_tokens: bool = False
  generator_weight: float = 1.0
  mlm_weight: float = 1.0
  rng_names: tuple[str, ...] = ("sample",)

  def model_inputs(self, batch):
    return {**contract.select(batch, contract.ENCODER_INPUTS),
            **contract.require(batch, contract.MLM, "ReplacedMLM")}

  def __call__(self, outputs, batch):
    needed = ("generator_logits", "logits", "corrupted_ids") + (
        ("copy_logits",) if self.all_tokens else ())
    for key in needed:
      if key not in outputs:
        model = "ElectraAllTokensMLM" if self.all_tokens else "ElectraReplacedMLM"
        raise ValueError(f"ReplacedMLM(all_tokens={self.all_tokens}) needs the model output "
                         f"{key!r}; use bertjax.models.electra.{model}.")
    mlm = contract.require(batch, contract.MLM, "ReplacedMLM")
    targets, weights = mlm["mlm_targets"], mlm["mlm_weights"]
    gen_sum, gen_correct, gen_count = base.weighted_cross_entropy(
        outputs["generator_logits"], targets, weights)
    if self.all_tokens:
      originals = jnp.where(weights > 0, targets, batch["input_ids"])
      net_sum, net_correct, net_count = copy_mixture_loss(
          outputs["logits"], outputs["copy_logits"], outputs["corrupted_ids"], originals,
          token_weights(batch))
    else:
      net_sum, net_correct, net_count = base.weighted_cross_entropy(
          outputs["logits"], targets, weights)
    loss = (self.generator_weight * base.safe_mean(gen_sum, gen_count)
            + self.mlm_weight * base.safe_mean(net_sum, net_count))
    return loss, {"mlm_loss": (gen_sum, gen_count), "mlm_accuracy": (gen_correct, gen_count),
                  "replaced_mlm_loss": (net_sum, net_count),
                  "replaced_mlm_accuracy": (net_correct, net_count)}
