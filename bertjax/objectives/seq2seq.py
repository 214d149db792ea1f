"""Sequence-to-sequence cross-entropy: T5 span corruption (and every T5 paper variant),
BART denoising and text-to-text fine-tuning all train the decoder to emit `labels`.

The batch is the EncDecFeatureConverter's: the decoder reads `decoder_input_ids`
(labels shifted right behind the start token) and the loss is averaged over
`label_weights` (1.0 on real target tokens). Packed batches add segment / position ids,
which pass straight to the model.

z_loss (Mesh TensorFlow / T5X) adds z_loss * log(Z)^2 per target token, keeping the
softmax normalizer near 1 for stable bfloat16 training; 0 disables it.
"""
import dataclasses

import gin
import jax
import jax.numpy as jnp

from bertjax import batch as contract
from bertjax.objectives import base


@gin.configurable
@dataclasses.dataclass(frozen=True)
class Seq2SeqLM:
  """Token cross-entropy of `logits` against `labels`, weighted by `label_weights`."""
  logits_key: str = "logits"
  z_loss: float = 0.0
  name: str = "seq2seq"
  rng_names: tuple[str, ...] = ()

  def model_inputs(self, batch):
    return contract.select(batch, contract.SEQ2SEQ_INPUTS)

  def __call__(self, outputs, batch):
    if self.logits_key not in outputs:
      raise ValueError(f"Seq2SeqLM expects the model output {self.logits_key!r}; the model "
                       f"returned {sorted(k for k, v in outputs.items() if v is not None)}.")
    logits = outputs[self.logits_key]
    targets = contract.require(batch, contract.TARGETS, "Seq2SeqLM")
    weights = targets["label_weights"]
    loss_sum, correct, count = base.weighted_cross_entropy(logits, targets["labels"], weights)
    metrics = {f"{self.name}_loss": (loss_sum, count),
               f"{self.name}_accuracy": (correct, count)}
    total = loss_sum
    if self.z_loss:
      log_z = jax.nn.logsumexp(logits.astype(jnp.float32), axis=-1)
      z_sum = (self.z_loss * jnp.square(log_z) * weights.astype(jnp.float32)).sum()
      metrics[f"{self.name}_z_loss"] = (z_sum, count)
      total = total + z_sum
    return base.safe_mean(total, count), metrics
