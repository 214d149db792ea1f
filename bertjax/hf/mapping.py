"""Declarative parameter mapping between Hugging Face state dicts and our param trees.

A family lists `Rule`s; this module applies them in either direction and checks every
shape against the shapes our module expects for the config, so a checkpoint that does
not match its config.json fails naming the tensor, the file and both shapes.
"""
import dataclasses
import math
from typing import Mapping, Sequence

import numpy as np

LAYER = "{layer}"


@dataclasses.dataclass(frozen=True)
class Rule:
  """One tensor. `hf` may contain '{layer}': one HF tensor per layer, stacked on our axis 0.

  kind:
    copy   - same shape on both sides (embeddings, LayerNorm).
    linear - torch Linear weight [out, in] <-> our kernel [*in, *out] (`in_dims` input axes).
    bias   - flat [n] on the HF side <-> our [*out] (e.g. [heads, kv]).
  """
  hf: str
  ours: str
  kind: str = "copy"
  in_dims: int = 1

  @property
  def per_layer(self) -> bool:
    return LAYER in self.hf


def _hf_shape(rule: Rule, ours_shape: Sequence[int]) -> tuple[int, ...]:
  if rule.kind == "linear":
    return (math.prod(ours_shape[rule.in_dims:]), math.prod(ours_shape[:rule.in_dims]))
  if rule.kind == "bias":
    return (math.prod(ours_shape),)
  return tuple(ours_shape)


def _to_ours(rule: Rule, tensor: np.ndarray, ours_shape: Sequence[int]) -> np.ndarray:
  if rule.kind == "linear":
    return tensor.T.reshape(ours_shape)
  return tensor.reshape(ours_shape)


def _to_hf(rule: Rule, array: np.ndarray) -> np.ndarray:
  if rule.kind == "linear":
    return array.reshape(math.prod(array.shape[:rule.in_dims]), -1).T
  if rule.kind == "bias":
    return array.reshape(-1)
  return array


def hf_to_ours(rules: Sequence[Rule], state: Mapping[str, np.ndarray],
               expected: Mapping[str, Sequence[int]], source: str) -> dict[str, np.ndarray]:
  """Flat {our/path: array} from an HF state dict; `expected` holds our shapes per path."""
  out = {}
  for rule in rules:
    if rule.ours not in expected:
      raise KeyError(f"Mapping rule targets {rule.ours!r}, which the module does not have.")
    shape = tuple(expected[rule.ours])
    if rule.per_layer:
      layers = [_fetch(rule, rule.hf.format(layer=i), state, shape[1:], source)
                for i in range(shape[0])]
      out[rule.ours] = np.stack(layers)
    else:
      out[rule.ours] = _fetch(rule, rule.hf, state, shape, source)
  missing = sorted(set(expected) - set(out))
  if missing:
    raise KeyError(f"No mapping rule fills these parameters: {missing}.")
  return out


def _fetch(rule: Rule, key: str, state, ours_shape, source: str) -> np.ndarray:
  if key not in state:
    raise ValueError(f"{source} has no tensor {key!r}, needed for parameter {rule.ours!r}. "
                     "Is the checkpoint for the architecture named in config.json?")
  tensor = state[key]
  want = _hf_shape(rule, ours_shape)
  if tuple(tensor.shape) != want:
    raise ValueError(f"{source}: tensor {key!r} has shape {tuple(tensor.shape)} but config.json "
                     f"implies {want} (for {rule.ours!r}). The weights do not match the config; "
                     "check hidden_size, num_attention_heads, intermediate_size, vocab_size.")
  return _to_ours(rule, tensor, ours_shape)


def ours_to_hf(rules: Sequence[Rule], flat: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
  state = {}
  for rule in rules:
    array = np.asarray(flat[rule.ours], np.float32)
    if rule.per_layer:
      for i, layer in enumerate(array):
        state[rule.hf.format(layer=i)] = _to_hf(rule, layer)
    else:
      state[rule.hf] = _to_hf(rule, array)
  return state


def unused_keys(rules: Sequence[Rule], state: Mapping[str, np.ndarray], num_layers: int) -> list[str]:
  used = set()
  for rule in rules:
    if rule.per_layer:
      used.update(rule.hf.format(layer=i) for i in range(num_layers))
    else:
      used.add(rule.hf)
  return sorted(set(state) - used)


# The usual torch modules, as the rules that map their tensors.

def linear(hf: str, ours: str, in_dims: int = 1, bias: bool = True,
           bias_kind: str = "copy") -> list[Rule]:
  """A torch Linear `hf` <-> our Dense `ours`: weight <-> kernel (with `in_dims` input axes)
  and, if it has one, bias <-> bias (`bias_kind` "bias" where ours is split per head)."""
  rules = [Rule(f"{hf}.weight", f"{ours}/kernel", "linear", in_dims)]
  return rules + ([Rule(f"{hf}.bias", f"{ours}/bias", bias_kind)] if bias else [])


def layer_norm(hf: str, ours: str, bias: bool = True) -> list[Rule]:
  """A torch LayerNorm `hf` <-> our norm `ours`: weight <-> scale and (if it has one) bias."""
  rules = [Rule(f"{hf}.weight", f"{ours}/scale")]
  return rules + ([Rule(f"{hf}.bias", f"{ours}/bias")] if bias else [])


def embedding(hf: str, ours: str) -> Rule:
  """A torch Embedding `hf` <-> our Embed `ours`."""
  return Rule(f"{hf}.weight", f"{ours}/embedding")


QKV = {"query": "query", "key": "key", "value": "value"}


def qkv_projections(hf: str, ours: str, names: Mapping[str, str] = QKV) -> list[Rule]:
  """An attention's query, key and value Linears (`names`: theirs -> ours, below the
  prefixes `hf` and `ours`) <-> our per-head projections, whose biases are [heads, kv]."""
  return [rule for theirs, name in names.items()
          for rule in linear(f"{hf}{theirs}", f"{ours}{name}", bias_kind="bias")]
