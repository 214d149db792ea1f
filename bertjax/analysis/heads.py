"""Head importance and iterative pruning (Michel et al., 2019, "Are Sixteen Heads Really
Better than One?").

The importance of head h is the expected absolute gradient of the loss with respect to
its mask variable xi_h (the probabilities of h multiplied by xi_h, all xi = 1):
I_h = E_batches |dL / d xi_h|, accumulated over a dataset, then normalised per layer by
the layer's L2 norm (their code's default). Iterative pruning removes, step after step, the
`step` fraction of all heads that are least important under the current mask (importance
recomputed with the pruned heads masked), and scores the model after each step.
"""
import functools
from typing import Any, Callable, Iterable, Mapping

import jax
import jax.numpy as jnp
import numpy as np

from bertjax.models.common import attention_maps

LossFn = Callable[[Mapping[str, Any], Mapping[str, Any]], jax.Array]  # (outputs, batch) -> loss


def mask_shape(module, params, inputs: Mapping[str, Any]) -> tuple[int, int]:
  """(layers, heads) of `module`'s self-attention head mask (`head_mask`)."""
  sites = attention_maps.find_sites(module, {"params": params}, **inputs)
  attention_maps.check_sites(sites, module, "head_mask")
  shapes = attention_maps.layout(sites)
  return shapes.get("attentions") or shapes["encoder_attentions"]


def importance(module, params, batches: Iterable[Mapping[str, Any]], loss_fn: LossFn,
               model_inputs: Callable[[Mapping], Mapping], head_mask=None,
               normalize: bool = True) -> np.ndarray:
  """[layers, heads] Michel et al. importance over `batches`.

  model_inputs(batch): the module's keyword inputs; loss_fn(outputs, batch): a scalar.
  head_mask: the current mask (pruned heads 0), default all ones.
  """
  grad_fn = mask_gradient(module, loss_fn)
  mask = total = None
  for batch in batches:
    inputs = model_inputs(batch)
    if mask is None:
      shape = mask_shape(module, params, inputs)
      mask = jnp.ones(shape, jnp.float32) if head_mask is None else attention_maps.check_mask(
          head_mask, "head_mask", shape, type(module).__name__)
    grad = np.abs(np.asarray(grad_fn(mask, params, inputs, batch)))
    total = grad if total is None else total + grad
  if total is None:
    raise ValueError("batches: no batch given; importance needs at least one.")
  if normalize:
    norm = np.linalg.norm(total, axis=-1, keepdims=True)
    total = total / np.where(norm > 0, norm, 1.0)
  return total


@functools.lru_cache(maxsize=16)
def mask_gradient(module, loss_fn: LossFn):
  """jit(d loss / d head_mask) as a function of (head_mask, params, inputs, batch)."""
  return jax.jit(jax.grad(lambda mask, params, inputs, batch: loss_fn(attention_maps.apply(
      module, {"params": params}, head_mask=mask, **inputs), batch)))


def prune_least_important(scores: np.ndarray, head_mask: np.ndarray, count: int) -> np.ndarray:
  """`head_mask` with the `count` remaining heads of lowest score set to 0."""
  mask = np.array(head_mask, np.float32)
  alive = np.flatnonzero(mask.ravel() != 0)
  order = alive[np.argsort(scores.ravel()[alive], kind="stable")]
  mask.ravel()[order[:count]] = 0.0
  return mask


def pruning_curve(module, params, importance_batches: Callable[[], Iterable[Mapping]],
                  loss_fn: LossFn, model_inputs: Callable[[Mapping], Mapping],
                  score_fn: Callable[[np.ndarray], float], step: float = 0.1,
                  max_fraction: float = 0.9) -> list[dict]:
  """Iterative pruning: rows {fraction_pruned, heads_pruned, score, head_mask}.

  score_fn(head_mask): the task score (e.g. dev accuracy) of the model under the mask.
  importance_batches(): a fresh iterable of batches for each importance estimate.
  """
  if not 0 < step <= 1:
    raise ValueError(f"step is {step}: give the fraction of heads pruned per step, in (0, 1].")
  if not 0 <= max_fraction <= 1:
    raise ValueError(f"max_fraction is {max_fraction}: give a fraction in [0, 1].")
  mask = None
  rows = []
  while True:
    if mask is None:
      first = next(iter(importance_batches()))
      mask = np.ones(mask_shape(module, params, model_inputs(first)), np.float32)
    pruned = int(mask.size - np.count_nonzero(mask))
    rows.append({"fraction_pruned": pruned / mask.size, "heads_pruned": pruned,
                 "score": float(score_fn(mask)), "head_mask": mask.tolist()})
    count = min(max(1, round(step * mask.size)), int(np.count_nonzero(mask)))
    if count == 0 or (pruned + count) / mask.size > max_fraction + 1e-9:
      return rows
    scores = importance(module, params, importance_batches(), loss_fn, model_inputs, mask)
    mask = prune_least_important(scores, mask, count)
