"""The bare encoder inside a model of any architecture, for fine-tuning and SBERT heads.

A checkpoint may hold the bare encoder (`BertModel`) or a pretraining wrapper
(`BertForPreTraining`, whose encoder sits under `bert/`). Fine-tuning needs the bare
encoder of the same family and its weights, found by matching the parameter shapes of
the family's base architecture against the checkpoint's subtrees.

  encoder = encoders.base_encoder(open_model(path))
"""
import dataclasses
from typing import Any

import flax.linen as nn
import jax
import numpy as np
from flax import traverse_util

from bertjax.checkpoints.model import HFModel, expected_shapes
from bertjax.hf.family import Family

# What fine-tuning and SBERT take: an HFModel of a bare encoder (base_encoder's result).
Encoder = HFModel


def base_encoder(model: HFModel) -> HFModel:
  """The bare encoder of `model`'s family (e.g. BertModel) with its weights, cut out of
  `model`'s params as host numpy arrays; same tokenizer, origin naming the whole model."""
  family, config = model.family, model.config
  name = base_architecture(family)
  if name is None:
    raise ValueError(f"Family {family.name!r} has no base encoder architecture "
                     f"(one of {sorted(family.architectures)}).")
  module = family.make_module(name, config)
  params = _subtree_fitting(family, module, config, model.params)
  # A wrapper without the pooler (e.g. BertForMaskedLM): the base encoder without it,
  # when the family's module can leave it out.
  if params is None and "add_pooling_layer" in {f.name for f in dataclasses.fields(module)}:
    module = module.clone(add_pooling_layer=False)
    params = _subtree_fitting(family, module, config, model.params)
  if params is None:
    raise ValueError(f"No subtree of the parameters of {model.description} matches those of "
                     f"{name}; top-level keys: {sorted(model.params)}.")
  origin = model.origin if params is model.params else f"{model.architecture}, {model.origin}"
  return dataclasses.replace(model, architecture=name, module=module, origin=origin,
                             params=jax.tree.map(np.asarray, params))


def base_architecture(family: Family) -> str | None:
  """The family's bare encoder architecture (BertModel, ElectraModel...), if it has one."""
  return next((a for a in family.architectures if a.endswith("Model") and "For" not in a), None)


def fits(family: Family, module: nn.Module, config: Any, params: Any) -> bool:
  """Whether `params` are exactly the parameters `module` takes (by path and shape)."""
  return _shapes(params) == expected_shapes(family, module, config)


def _subtree_fitting(family: Family, module: nn.Module, config: Any, params: Any):
  """The shallowest dict in `params` (itself included) that `module` takes, or None."""
  want, level = expected_shapes(family, module, config), [params]
  while level:
    for tree in level:
      if isinstance(tree, dict) and _shapes(tree) == want:
        return tree
    level = [v for t in level if isinstance(t, dict) for v in t.values()]
  return None


def _shapes(tree: Any) -> dict[str, tuple]:
  return {k: tuple(np.shape(v)) for k, v in traverse_util.flatten_dict(tree, sep="/").items()}
