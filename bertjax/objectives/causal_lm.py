"""Left-to-right language modelling (GPT; BERT Table 5's "LTR & No NSP" baseline).

Each token predicts the next one. Batches either carry `labels` / `label_weights`
(the decoder-only batch contract) or only the encoder-style features of the packed
`causal_lm` task, from which the targets are the inputs shifted by one, weighted where
the next token is real and belongs to the same packed example.
"""
import dataclasses
from typing import Mapping

import gin
import jax.numpy as jnp

from bertjax import batch as contract
from bertjax.objectives import base


def next_token_targets(batch: Mapping[str, base.Array]) -> tuple[base.Array, base.Array]:
  """(targets [B, L], weights [B, L]): input_ids shifted left, weight 0 where the next
  position is padding, another packed example, or past the end."""
  ids = batch["input_ids"]
  real = batch.get("attention_mask", jnp.ones_like(ids)).astype(bool)
  segments = batch.get("segment_ids")
  targets = jnp.pad(ids[:, 1:], ((0, 0), (0, 1)))
  weights = jnp.pad(real[:, 1:] & real[:, :-1], ((0, 0), (0, 1)))
  if segments is not None:
    weights = weights & jnp.pad(segments[:, 1:] == segments[:, :-1], ((0, 0), (0, 1)))
  return targets, weights.astype(jnp.float32)


@gin.configurable
@dataclasses.dataclass(frozen=True)
class CausalLM:
  """Next-token cross-entropy over the weighted positions (mean over their count)."""
  logits_key: str = "logits"
  name: str = "lm"
  rng_names: tuple[str, ...] = ()

  def model_inputs(self, batch):
    # GPT looks token types up in its token table; packed LM batches carry all-zero ones,
    # which must not reach the model.
    return contract.select(batch, contract.LM_INPUTS)

  def __call__(self, outputs, batch):
    if "labels" in batch:
      targets = batch["labels"]
      weights = batch.get("label_weights", jnp.ones(targets.shape, jnp.float32))
    else:
      targets, weights = next_token_targets(batch)
    loss_sum, correct, count = base.weighted_cross_entropy(outputs[self.logits_key], targets,
                                                           weights)
    metrics = {f"{self.name}_loss": (loss_sum, count), f"{self.name}_accuracy": (correct, count)}
    return base.safe_mean(loss_sum, count), metrics
