"""XLNet's permutation language modelling with partial prediction (Yang et al., 2019).

The data layer (`bertjax.data.preprocessors.permutation`) has drawn the
factorization order and the targets: the last ~1/K tokens of the order (K = 6 or 7,
the cutting point) are predicted, the rest are context. Its `perm_mask` encodes the
order, `target_mapping` picks the P target positions, and `target_ids` /
`target_weights` hold their tokens. The loss is the cross-entropy of the query
stream's logits [B, P, V] over real target rows.

Segment recurrence: with `carry_memory`, the objective declares carried state for the
trainer (`initial_carry` / `next_carry`, see `bertjax.train.step`): each step's
memory (every layer's hidden states of the segment, stop-gradient) is fed to the
next step's batch as `mems`, so row b of step t+1 attends to row b of step t, as in
XLNet's pretraining. That memory is the text right before step t+1's row b when the
data are row streams advancing by the model's `reuse_len` (the `xlnet_plm` task with
the same reuse_len, objectives/xlnet_plm.gin). The first step reads zero memory, as
the reference does; the trainer checkpoints the memory with the rest of the state.
"""
import dataclasses
from typing import Any, Mapping

import gin
import jax
import jax.numpy as jnp

from bertjax import batch as contract
from bertjax.objectives import base


@gin.configurable
@dataclasses.dataclass(frozen=True)
class PermutationLM:
  """Cross-entropy over target_mapping's rows.

  logits_key: the model output holding [B, P, V] logits (XLNetLMHeadModel: `logits`).
  carry_memory: carry XLNet memory from one training step to the next.
  """
  logits_key: str = "logits"
  name: str = "plm"
  carry_memory: bool = True
  rng_names: tuple[str, ...] = ()

  def model_inputs(self, batch: Mapping[str, base.Array]) -> dict[str, base.Array]:
    inputs = contract.select(batch, contract.PERMUTATION_INPUTS)
    if "mems" in batch:  # carried batch-major [B, layers, M, H]; the model is layer-major
      inputs["mems"] = jnp.swapaxes(batch["mems"], 0, 1)
    return inputs

  def __call__(self, outputs, batch):
    if self.logits_key not in outputs:
      raise ValueError(f"PermutationLM expects the model output {self.logits_key!r}; the model "
                       f"returned {sorted(k for k, v in outputs.items() if v is not None)}.")
    targets = contract.require(batch, contract.PERMUTATION_TARGETS, "PermutationLM",
                               writer="the 'xlnet_plm' task")
    loss_sum, correct, count = base.weighted_cross_entropy(
        outputs[self.logits_key], targets["target_ids"], targets["target_weights"])
    metrics = {f"{self.name}_loss": (loss_sum, count),
               f"{self.name}_accuracy": (correct, count)}
    return base.safe_mean(loss_sum, count), metrics

  # ---------------------------------------------------------------- carried state
  def initial_carry(self, model: Any, batch_size: int) -> dict[str, jax.Array]:
    """Zero memory [B, layers, mem_len, H] (batch first, so it splits like the batch)."""
    if not self.carry_memory:
      return {}
    cfg = model.config
    if not cfg.mem_len or not cfg.reuse_len:
      raise ValueError("PermutationLM.carry_memory needs a fixed memory length and the "
                       "data's context length: set the model's mem_len > 0 and reuse_len "
                       "(= xlnet_preprocessors.reuse_len) in build_model.config_overrides, "
                       "or bind PermutationLM.carry_memory = False.")
    shape = (batch_size, cfg.num_layers, cfg.mem_len, cfg.hidden_size)
    return {"mems": jnp.zeros(shape, jnp.dtype(cfg.dtype))}

  def next_carry(self, outputs, batch) -> dict[str, jax.Array]:
    del batch
    if not self.carry_memory:
      return {}
    return {"mems": jax.lax.stop_gradient(jnp.swapaxes(outputs["mems"], 0, 1))}
