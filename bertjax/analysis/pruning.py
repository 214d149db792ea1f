"""Real head pruning: the heads' parameters removed, a smaller model with the masked one's outputs.

Dropping head h of a layer removes its slices of the query / key / value kernels and
biases ([embed, heads, kv], [heads, kv]) and of the output kernel ([heads, kv, embed]).
Since a head masked to 0 contributes nothing to the output projection, the pruned model
equals the model run with that head masked (bertjax.models.common.attention_maps).

Pruned layers may keep different numbers of heads, so they cannot share one `nn.scan`:
`prune` returns the model with its `layers/...` stack replaced by an unrolled stack
(`layer_0`, `layer_1`, ...) of TransformerLayers of their own widths. Encoders built on
`layers.transformer.TransformerStack` (BERT, RoBERTa, ELECTRA, DistilBERT, SpanBERT, GPT)
can be pruned; ALBERT's layers share one set of parameters and cannot.
"""
import dataclasses
from typing import Any, Mapping, Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
from flax import traverse_util

from bertjax.layers import transformer

LAYER_FIELDS = ("num_layers", "head_dim", "intermediate_size", "activation", "hidden_dropout",
                "attention_dropout", "layer_norm_eps", "pre_norm", "use_bias", "init_std",
                "dtype")
HEAD_AXIS = {"query": 1, "key": 1, "value": 1, "out": 0}  # of each unstacked kernel


class PrunedStack(nn.Module):
  """The layers of a TransformerStack, unrolled, layer i with `heads[i]` heads."""
  heads: tuple[int, ...]
  layer: tuple  # TransformerLayer keyword arguments (LAYER_FIELDS) as pairs

  @nn.compact
  def __call__(self, x, mask=None, bias=None, *, positions=None, deterministic: bool = True,
               output_hidden_states: bool = False, decode: bool = False):
    if decode:
      raise ValueError("decode: a pruned model has no key/value cache; decode unpruned.")
    states = []
    for i, num_heads in enumerate(self.heads):
      x, _ = transformer.TransformerLayer(num_heads=num_heads, deterministic=deterministic,
                                          **dict(self.layer), name=f"layer_{i}")(x, mask, bias,
                                                                            positions)
      states.append(x)
    return x, (jnp.stack(states) if output_hidden_states else None)


@dataclasses.dataclass
class PrunedModel:
  """`module` (the original model) run with its TransformerStack swapped for `PrunedStack`
  over `params` (where the stack's `layers` subtree is the pruned `layer_i` ones).
  `kept[i]`: the original indices of layer i's remaining heads."""
  module: nn.Module
  params: Any
  kept: tuple[tuple[int, ...], ...]

  def apply(self, *args, **kwargs):
    swapped = []
    with nn.intercept_methods(lambda *a: self._swap_stack(swapped, *a)):
      out = self.module.apply({"params": self.params}, *args, **kwargs)
    if not swapped:
      raise ValueError(f"prune: {type(self.module).__name__} runs no TransformerStack; only "
                       "encoders built on it can be pruned.")
    return out

  def _swap_stack(self, swapped, next_fun, args, kwargs, context):
    module = context.module
    if not (isinstance(module, transformer.TransformerStack) and context.method_name == "__call__"):
      return next_fun(*args, **kwargs)
    if module.attention_spec is not None:
      raise ValueError("prune: long-sequence attention (attention_spec) cannot be pruned.")
    swapped.append(module.name)
    layer = tuple((name, getattr(module, name)) for name in LAYER_FIELDS)
    stack = PrunedStack(tuple(len(k) for k in self.kept), layer, parent=None)
    rngs = None if kwargs.get("deterministic", True) else {"dropout": module.make_rng("dropout")}
    return stack.apply({"params": module.variables["params"]["layers"]}, *args, rngs=rngs,
                       **kwargs)

  def num_params(self) -> int:
    return sum(int(np.size(x)) for x in jax.tree.leaves(self.params))


def stack_paths(params: Mapping) -> list[tuple[str, ...]]:
  """Paths of the scanned TransformerStack parameter trees (`.../layers/attention/query`)."""
  flat = traverse_util.flatten_dict(dict(params))
  return sorted({k[:k.index("attention") - 1] for k in flat
                 if "attention" in k and k[k.index("attention") - 1] == "layers"
                 and k[k.index("attention") + 1] in HEAD_AXIS})


def heads_to_keep(head_mask: Any, num_layers: int, num_heads: int) -> tuple[tuple[int, ...], ...]:
  """A [layers, heads] 0/1 mask -> per layer, the heads whose entry is not 0."""
  mask = np.asarray(head_mask)
  if mask.shape != (num_layers, num_heads):
    raise ValueError(f"head_mask has shape {mask.shape}; the model has {num_layers} layers x "
                     f"{num_heads} heads: give shape {(num_layers, num_heads)} (1 keep, 0 prune).")
  return tuple(tuple(int(h) for h in np.flatnonzero(row != 0)) for row in mask)


def prune(module: nn.Module, params: Mapping, head_mask: Any) -> PrunedModel:
  """The model without the heads whose `head_mask` [layers, heads] entry is 0."""
  params = nn.unbox(params)
  paths = stack_paths(params)
  if len(paths) != 1:
    raise ValueError(f"prune: {type(module).__name__} has {len(paths)} prunable "
                     "TransformerStack(s); only models with exactly one (BERT, RoBERTa, "
                     "ELECTRA, DistilBERT, SpanBERT, GPT) can be pruned. ALBERT's shared layers "
                     "and the families with their own attention layers (DeBERTa, XLNet, T5, "
                     "BART) are masked with head_mask instead.")
  stack = traverse_util.flatten_dict(_subtree(params, paths[0] + ("layers",)))
  query = stack[("attention", "query", "kernel")]
  if query.ndim != 4:
    raise ValueError(f"prune: {'/'.join(paths[0])} holds one layer's parameters shared by all "
                     "layers (ALBERT); shared layers cannot lose different heads.")
  num_layers, num_heads = query.shape[0], query.shape[2]
  kept = heads_to_keep(head_mask, num_layers, num_heads)
  layers = {}
  for i, heads in enumerate(kept):
    index = np.asarray(heads, np.int32)
    layer = {}
    for key, value in stack.items():
      value = value[i]
      if key[0] == "attention" and key[1] in HEAD_AXIS and not (key[1] == "out" and
                                                                 key[2] == "bias"):
        value = jnp.take(value, index, axis=HEAD_AXIS[key[1]] if key[2] == "kernel" else 0)
      layer[key] = value
    layers[f"layer_{i}"] = traverse_util.unflatten_dict(layer)
  pruned = _replace(params, paths[0] + ("layers",), layers)
  return PrunedModel(module, pruned, kept)


def _subtree(tree: Mapping, path: Sequence[str]) -> Mapping:
  for part in path:
    tree = tree[part]
  return tree


def _replace(tree: Mapping, path: Sequence[str], value: Any) -> dict:
  if not path:
    return value
  out = dict(tree)
  out[path[0]] = _replace(tree[path[0]], path[1:], value)
  return out
