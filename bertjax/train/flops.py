"""Model FLOPs of one training step (the "MFU" numerator), counted analytically.

Per token, a training step (forward + backward = 3x forward) costs
  6 * (weights used in matmuls)              dense layers: every `kernel` leaf
  + 6 * vocab * hidden                       the tied output projection, once per
                                             output scoring every position over the
                                             vocab (SpanBERT's MLM and SBO heads, ELMo's
                                             two directions, ELECTRA's generator...)
  + 12 * layers * hidden * sequence_length   attention scores (QK^T) and mixing (AV)
Embedding lookups, norms, activations and softmax are not counted (as in Kaplan et
al. 2020 and the PaLM MFU definition), so the number is the useful work of the model,
independent of remat or padding tricks.
"""
import math
from typing import Any

import jax
import jax.extend


def matmul_params(params: Any) -> int:
  """Number of weights in dense-layer kernels (stacked scan layers included)."""
  total = 0
  for path, leaf in jax.tree_util.tree_leaves_with_path(params):
    if getattr(path[-1], "key", None) == "kernel":
      total += int(leaf.size)
  return total


def training_flops_per_token(params: Any, sequence_length: int, num_layers: int = 0,
                             hidden_size: int = 0, vocab_projection: int = 0) -> float:
  """Training FLOPs per token; `vocab_projection` = vocab * hidden when logits over the
  vocabulary are computed at every position with the (tied) embedding matrix."""
  return (6.0 * (matmul_params(params) + vocab_projection)
          + 12.0 * num_layers * hidden_size * sequence_length)


def for_model(model: Any, params: Any, sequence_length: int, output_shapes: dict) -> float:
  """Training FLOPs per token for a module whose config names its sizes (BERT-style); each
  [B, P, vocab] output counts one vocabulary projection at P of every `sequence_length`
  positions (P < L: an MLM head run only at the masked positions, as max_predictions)."""
  config = getattr(model, "config", None)
  layers = getattr(config, "num_layers", 0) or 0
  hidden = getattr(config, "hidden_size", 0) or 0
  vocab = getattr(config, "vocab_size", 0) or 0
  scored = sum(s.shape[1] / sequence_length for s in output_shapes.values()
               if getattr(s, "ndim", 0) == 3 and s.shape[-1] == vocab)
  return training_flops_per_token(params, sequence_length, layers, hidden,
                                  scored * vocab * hidden)


def dot_flops(fn, *args, **kwargs) -> float:
  """FLOPs of every matrix product `fn(*args, **kwargs)` performs (2 per multiply-add),
  read from its jaxpr: scanned bodies count once per step, `cond` its costliest branch.
  Times 3, the forward pass's count is a training step's model FLOPs, whatever the
  architecture (it counts exactly the products the model runs, e.g. an MLM head at
  masked positions only)."""
  return _jaxpr_dot_flops(jax.make_jaxpr(fn)(*args, **kwargs).jaxpr)


def _jaxpr_dot_flops(jaxpr) -> float:
  total = 0.0
  for eqn in jaxpr.eqns:
    if eqn.primitive.name == "dot_general":
      (contract, _), _ = eqn.params["dimension_numbers"]
      lhs = eqn.invars[0].aval.shape
      out = eqn.outvars[0].aval.shape
      total += 2.0 * math.prod(out) * math.prod(lhs[d] for d in contract)
      continue
    inner = [_jaxpr_dot_flops(getattr(v, "jaxpr", v)) for v in _sub_jaxprs(eqn.params)]
    if not inner:
      continue
    if eqn.primitive.name == "cond":
      total += max(inner)
    else:
      total += sum(inner) * eqn.params.get("length", 1)
  return total


def _sub_jaxprs(params: dict) -> list:
  found = []
  for value in params.values():
    for item in value if isinstance(value, (tuple, list)) else (value,):
      if isinstance(item, (jax.extend.core.Jaxpr, jax.extend.core.ClosedJaxpr)):
        found.append(item)
  return found
