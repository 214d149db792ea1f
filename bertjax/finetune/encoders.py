"""The pretrained encoder under a head: from a converted checkpoint or an HF folder.

A checkpoint may hold the bare encoder (`BertModel`) or a pretraining wrapper
(`BertForPreTraining`, whose encoder sits under `bert/`). Fine-tuning needs the bare
encoder of the same family and its weights, found by matching the parameter tree of
the family's base architecture against the checkpoint's top level and its subtrees.
"""
import dataclasses
import os
from typing import Any

import flax.linen as nn
import jax
import numpy as np

from bertjax.hf import checkpoint as hf_checkpoint
from bertjax.hf import model as hf_model


@dataclasses.dataclass
class Encoder:
  module: nn.Module
  params: Any          # host numpy arrays
  config: Any
  tokenizer_dir: str   # where vocab.txt / tokenizer.json live
  description: str


def load(path: str, tokenizer_dir: str | None = None) -> Encoder:
  """`path`: a `python -m bertjax.convert` output, or a Hugging Face model folder."""
  if not os.path.isdir(path):
    raise FileNotFoundError(f"No checkpoint folder at {path!r}.")
  if os.path.exists(os.path.join(path, "config.json")):
    loaded = hf_model.from_hf(path)
  else:
    loaded = hf_checkpoint.load(path)
  module, params = base_encoder(loaded.family, loaded.architecture, loaded.config,
                                loaded.params)
  return Encoder(module, jax.tree.map(np.asarray, params), loaded.config,
                 tokenizer_dir or path, f"{loaded.family.name} {loaded.architecture} from {path}")


def base_encoder(family, architecture: str, config, params) -> tuple[nn.Module, Any]:
  """(bare encoder module, its params) for a checkpoint of any architecture of `family`."""
  base_names = [a for a in family.architectures if a.endswith("Model") and "For" not in a]
  if not base_names:
    raise ValueError(f"Family {family.name!r} has no base encoder architecture "
                     f"(one of {sorted(family.architectures)}).")
  module = family.make_module(base_names[0], config)
  expected = jax.eval_shape(lambda: nn.unbox(module.init(jax.random.key(0),
                                                         **family.init_inputs(config))["params"]))
  want = _signature(expected)
  if _signature(params) == want:
    return module, params
  for name, subtree in params.items():
    if isinstance(subtree, dict) and _signature(subtree) == want:
      return module, subtree
  # A wrapper without the pooler (e.g. BertForMaskedLM): rebuild the base encoder
  # without it when the family's module supports that.
  if "add_pooling_layer" in {f.name for f in dataclasses.fields(type(module))}:
    module = module.clone(add_pooling_layer=False)
    expected = jax.eval_shape(lambda: nn.unbox(module.init(
        jax.random.key(0), **family.init_inputs(config))["params"]))
    want = _signature(expected)
    for subtree in [params, *params.values()]:
      if isinstance(subtree, dict) and _signature(subtree) == want:
        return module, subtree
  raise ValueError(f"No subtree of the {architecture} checkpoint matches the parameters of "
                   f"{base_names[0]}; top-level keys: {sorted(params)}.")


def _signature(tree) -> dict:
  return {jax.tree_util.keystr(p): tuple(np.shape(v))
          for p, v in jax.tree_util.tree_leaves_with_path(tree)}
