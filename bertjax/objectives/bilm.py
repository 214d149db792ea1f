"""ELMo's bidirectional LM loss: the forward and backward next-word cross-entropies.

    loss = (mean NLL of the forward LM + mean NLL of the backward LM) / 2

(Peters et al., 2018, eq. 1 maximises the sum of both log likelihoods; halving it keeps
the learning rate comparable with a one-direction LM). Targets come from the `bilm`
recipe (0 = no target). Metrics are `(sum, count)` per direction, so the trainer's mean
of `forward_loss` / `backward_loss` is the per-word NLL in nats and
exp(of it) the held-out perplexity (`perplexity`).
"""
import dataclasses
import math
from typing import Mapping

import gin

from bertjax import batch as contract
from bertjax.objectives import base

DIRECTIONS = ("forward", "backward")


@gin.configurable
@dataclasses.dataclass(frozen=True)
class BidirectionalLM:
  """Cross-entropy of both directions over the shared softmax's logits."""
  rng_names: tuple[str, ...] = ()

  def model_inputs(self, batch):
    return contract.select(batch, contract.BILM_INPUTS)

  def __call__(self, outputs, batch):
    targets = contract.require(batch, contract.BILM_TARGETS, "BidirectionalLM",
                               writer="the 'bilm' recipe, bertjax.data.recipes.bilm")
    metrics, losses = {}, []
    for direction in DIRECTIONS:
      key = f"{direction}_logits"
      if outputs.get(key) is None:
        given = sorted(k for k, v in outputs.items() if v is not None)
        raise ValueError(f"BidirectionalLM expects the model output {key!r} (ElmoBiLM); the "
                         f"model returned {given}.")
      ids = targets[f"{direction}_targets"]
      loss_sum, correct, count = base.weighted_cross_entropy(outputs[key], ids, ids > 0)
      metrics[f"{direction}_loss"] = (loss_sum, count)
      metrics[f"{direction}_accuracy"] = (correct, count)
      losses.append(base.safe_mean(loss_sum, count))
    return (losses[0] + losses[1]) / 2, metrics


def perplexity(results: Mapping[str, float]) -> dict[str, float]:
  """{'forward_perplexity', 'backward_perplexity'} from the trainer's mean losses (nats)."""
  return {f"{d}_perplexity": math.exp(results[f"{d}_loss"]) for d in DIRECTIONS
          if f"{d}_loss" in results}
