"""`from_hf` / `to_hf`: Hugging Face model directories <-> runnable bertjax models."""
import dataclasses
import functools
import logging
import os
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
from flax import traverse_util

from bertjax.inference import decoding
from bertjax.hf import io, mapping, registry
from bertjax.hf.family import Family
from bertjax.models.common import task_heads

log = logging.getLogger(__name__)


@dataclasses.dataclass
class HFModel:
  """A model converted from (or exportable to) Hugging Face.

  Call it with the reference's input names (`input_ids`, `attention_mask`, ...); it
  returns numpy arrays named like the reference class's outputs.
  """
  family: Family
  architecture: str
  config: Any
  module: nn.Module
  params: Any

  def __call__(self, **inputs) -> dict[str, np.ndarray]:
    inputs = self.family.prepare_inputs(inputs)
    arrays = {k: jnp.asarray(v) for k, v in inputs.items() if v is not None and _is_array(v)}
    static = tuple(sorted((k, v) for k, v in inputs.items() if v is not None and not _is_array(v)))
    outputs = _apply(self.module, static)(self.params, arrays)
    return {k: np.asarray(v) for k, v in self.family.outputs(self.architecture, outputs).items()}

  def generate(self, input_ids, attention_mask=None, **kwargs) -> np.ndarray:
    """Token ids as transformers' `generate` returns them (greedy, beam search, sampling;
    see bertjax.inference.decoding.generate for the arguments)."""
    if not self.family.can_generate(self.architecture):
      raise ValueError(f"{self.architecture} has no language-model head to generate with; "
                       "load a ...LMHeadModel / ...ForConditionalGeneration checkpoint.")
    return decoding.generate(self.module, self.params, input_ids, attention_mask,
                             model_config=self.config, **kwargs)


def _is_array(value) -> bool:
  return isinstance(value, (np.ndarray, jax.Array)) or hasattr(value, "__array__")


@functools.lru_cache(maxsize=64)
def _apply(module: nn.Module, static: tuple):
  return jax.jit(lambda params, arrays: module.apply({"params": params}, **arrays, **dict(static)))


def expected_shapes(family: Family, module: nn.Module, config: Any) -> dict[str, tuple]:
  inputs = family.init_inputs(config)
  if isinstance(module, task_heads.MultipleChoice):  # rows of [batch, choices, length]
    inputs = {k: v[:, None] for k, v in inputs.items()}
  abstract = jax.eval_shape(lambda: nn.unbox(module.init(jax.random.PRNGKey(0),
                                                         **inputs)["params"]))
  return {k: v.shape for k, v in traverse_util.flatten_dict(abstract, sep="/").items()}


def from_hf(path: str | os.PathLike) -> HFModel:
  """Loads a local Hugging Face model directory (config.json + safetensors / .bin)."""
  hf_config = io.read_config(path)
  source = os.path.join(str(path), io.CONFIG_FILE)
  if "model_type" not in hf_config:
    raise ValueError(f"{source} has no 'model_type'; cannot tell which model family it is.")
  family = registry.family_for(hf_config["model_type"], source)
  architecture = (hf_config.get("architectures") or [next(iter(family.architectures))])[0]
  family.check_architecture(architecture, source)
  config = family.config_from_hf(hf_config)
  module = family.make_module(architecture, config)
  state, weights_file = io.load_state_dict(path)
  state = family.state_from_hf(state, config)
  rules = family.rules(architecture, config)
  flat = mapping.hf_to_ours(rules, state, expected_shapes(family, module, config), weights_file)
  leftovers = [k for k in mapping.unused_keys(rules, state, _num_layers(config))
               if not family.is_ignored(k)]
  if leftovers:
    log.warning("%s: %d tensors not used by %s: %s", weights_file, len(leftovers), architecture,
                leftovers[:10])
  params = traverse_util.unflatten_dict({k: jnp.asarray(v) for k, v in flat.items()}, sep="/")
  return HFModel(family, architecture, config, module, params)


def to_hf(model: HFModel, path: str | os.PathLike) -> None:
  """Writes `model` as a Hugging Face directory that transformers' from_pretrained loads."""
  flat = {k: np.asarray(v) for k, v in
          traverse_util.flatten_dict(jax.device_get(model.params), sep="/").items()}
  state = mapping.ours_to_hf(model.family.rules(model.architecture, model.config), flat)
  state = model.family.state_to_hf(state, model.config)
  io.write_model_dir(path, model.family.config_to_hf(model.config, model.architecture), state)


def _num_layers(config: Any) -> int:
  return getattr(config, "num_layers", 0)
