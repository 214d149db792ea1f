"""The pretrained encoder under a head: a converted checkpoint, an HF folder, or a run.

A checkpoint may hold the bare encoder (`BertModel`) or a pretraining wrapper
(`BertForPreTraining`, whose encoder sits under `bert/`). Fine-tuning needs the bare
encoder of the same family and its weights, found by matching the parameter tree of
the family's base architecture against the checkpoint's subtrees.

A `python -m bertjax.main` model_dir has no family metadata: its model is rebuilt
from the `build_model` bindings of the run's config.gin (read with gin's parser, not
applied, so the fine-tuning config stays untouched), the family is the one whose base
encoder takes that model's config class, and the weights are the latest checkpoint's.
"""
import dataclasses
import os
import typing
from typing import Any

import flax.linen as nn
import jax
import numpy as np
from gin import config_parser

from bertjax import configurables
from bertjax.checkpoints.params import load_params
from bertjax.checkpoints import converted as hf_checkpoint
from bertjax.hf import model as hf_model
from bertjax.hf import registry
from bertjax.models import electra

RUN_CONFIG_FILE = "config.gin"  # what bertjax.main writes into a model_dir

# Pretraining models whose encoder is not one subtree of their params: how to cut it out.
_ENCODER_SURGERY = {
    electra.ElectraGeneratorDiscriminator: electra.discriminator_params,
}


@dataclasses.dataclass
class Encoder:
  module: nn.Module
  params: Any          # host numpy arrays
  config: Any
  tokenizer_dir: str   # where vocab.txt / tokenizer.json live
  description: str

  def fit_inputs(self, arrays: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Task arrays as this encoder takes them: an encoder with a single token type
    (RoBERTa: type_vocab_size = 1) sees pairs with type 0 throughout, as its own
    tokenizer feeds them; a type id past its table would read garbage."""
    if "token_type_ids" in arrays and getattr(self.config, "type_vocab_size", 2) == 1:
      return {**arrays, "token_type_ids": np.zeros_like(arrays["token_type_ids"])}
    return arrays


def load(path: str, tokenizer_dir: str | None = None) -> Encoder:
  """`path`: a `python -m bertjax.convert` output, a Hugging Face model folder, or a
  `python -m bertjax.main` model_dir (its latest checkpoint)."""
  if not os.path.isdir(path):
    raise FileNotFoundError(f"No checkpoint folder at {path!r}.")
  if os.path.exists(os.path.join(path, RUN_CONFIG_FILE)):
    return _from_run(path, tokenizer_dir)
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
  for subtree in _subtrees(params):
    if _signature(subtree) == want:
      return module, subtree
  # A wrapper without the pooler (e.g. BertForMaskedLM): rebuild the base encoder
  # without it when the family's module supports that.
  if "add_pooling_layer" in {f.name for f in dataclasses.fields(type(module))}:
    module = module.clone(add_pooling_layer=False)
    expected = jax.eval_shape(lambda: nn.unbox(module.init(
        jax.random.key(0), **family.init_inputs(config))["params"]))
    want = _signature(expected)
    for subtree in _subtrees(params):
      if _signature(subtree) == want:
        return module, subtree
  raise ValueError(f"No subtree of the {architecture} checkpoint matches the parameters of "
                   f"{base_names[0]}; top-level keys: {sorted(params)}.")


def _subtrees(params) -> list[dict]:
  """`params` and every dict below it, shallowest first."""
  found, level = [], [params]
  while level:
    found += [t for t in level if isinstance(t, dict)]
    level = [v for t in level if isinstance(t, dict) for v in t.values()]
  return found


# ----------------------------------------------------------------- bertjax.main runs
def _from_run(model_dir: str, tokenizer_dir: str | None) -> Encoder:
  with open(os.path.join(model_dir, RUN_CONFIG_FILE)) as f:
    candidates = run_models(f.read())
  params, metadata = load_params(model_dir)
  errors = []
  for scope, model in candidates:
    family = family_for_config(model.config)
    weights = _ENCODER_SURGERY.get(type(model), lambda p: p)(params)
    try:
      module, encoder_params = base_encoder(family, type(model).__name__, model.config, weights)
    except ValueError as e:
      errors.append(f"{scope or 'build_model'}: {e}")
      continue
    where = f"{scope}/ of " if scope else ""
    return Encoder(module, jax.tree.map(np.asarray, encoder_params), model.config,
                   tokenizer_dir or model_dir,
                   f"{family.name} {type(module).__name__} ({where}{type(model).__name__}, "
                   f"step {metadata.get('step')}) from {model_dir}")
  raise ValueError(f"No encoder found in the checkpoint of {model_dir}: " + "; ".join(errors))


class _Reference(typing.NamedTuple):
  name: str


class _Delegate(config_parser.ParserDelegate):
  """Parses references and macros into placeholders instead of resolving them."""

  def configurable_reference(self, scoped_configurable_name, evaluate):
    return _Reference(scoped_configurable_name)

  def macro(self, macro_name):
    return _Reference("%" + macro_name)


def run_models(config_text: str) -> list[tuple[str, nn.Module]]:
  """(gin scope, model) for every `build_model` binding set of a run's config.gin.

  The model the run trained comes first (`Trainer.model`'s reference; a distillation
  run's student before its teacher).
  """
  bindings: dict[str, dict[str, Any]] = {}
  macros: dict[str, Any] = {}
  trainer_model = None
  for statement in config_parser.ConfigParser(config_text, _Delegate()):
    if not isinstance(statement, config_parser.BindingStatement):
      continue
    if not statement.arg_name:
      macros[statement.selector] = statement.value
    elif statement.selector.rsplit(".", 1)[-1] == "build_model":
      bindings.setdefault(statement.scope, {})[statement.arg_name] = statement.value
    elif statement.selector.rsplit(".", 1)[-1] == "Trainer" and statement.arg_name == "model":
      trainer_model = statement.value
  resolve = lambda v: (macros[v.name[1:]] if isinstance(v, _Reference) and v.name.startswith("%")
                       else v)
  if not bindings:
    raise ValueError(f"The run's {RUN_CONFIG_FILE} has no build_model bindings; fine-tuning "
                     "needs them to rebuild the pretrained model.")
  first = trainer_model.name.rpartition("/")[0] if isinstance(trainer_model, _Reference) else ""
  order = sorted(bindings, key=lambda s: (s != first, s != "student", s))
  models = []
  for scope in order:
    # Scoped bindings extend the unscoped ones, as gin applies them; dtype is the
    # fine-tuning run's business.
    args = {k: resolve(v) for k, v in {**bindings.get("", {}), **bindings[scope]}.items()
            if k != "dtype"}
    if "architecture" in args and "config" in args:
      models.append((scope, configurables.build_model(**args)))
  if not models:
    raise ValueError(f"The run's {RUN_CONFIG_FILE} binds no build_model.architecture / "
                     "build_model.config.")
  return models


def family_for_config(config) -> Any:
  """The HF-bridge family whose base encoder is configured by `type(config)` (exactly,
  else by a base class: SpanBERT's config extends BERT's)."""
  matches = []
  for model_type in registry.FAMILIES:
    family = registry.family_for(model_type)
    base = [a for a in family.architectures if a.endswith("Model") and "For" not in a]
    if not base:
      continue
    try:  # make_module only stores the config; a foreign one is caught by the type check
      config_type = typing.get_type_hints(type(family.make_module(base[0], config))).get("config")
    except (TypeError, AttributeError, KeyError, ValueError, NameError):
      continue
    if config_type is type(config):
      return family
    if isinstance(config_type, type) and isinstance(config, config_type):
      matches.append((len(config_type.__mro__), family))
  if not matches:
    raise ValueError(f"No model family has a base encoder for {type(config).__name__}.")
  return max(matches, key=lambda m: m[0])[1]


def _signature(tree) -> dict:
  return {jax.tree_util.keystr(p): tuple(np.shape(v))
          for p, v in jax.tree_util.tree_leaves_with_path(tree)}
