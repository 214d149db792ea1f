"""The model a `python -m bertjax.main` run trained, rebuilt from its model_dir.

A model_dir holds no family metadata: the model is rebuilt from the `build_model`
bindings of the run's config.gin (read with gin's parser, not applied, so the caller's
own gin config stays untouched), its family is the one whose base encoder takes that
model's config class, and its weights are a step's params (the latest by default).
"""
import os
import typing
from typing import Any, Callable

import flax.linen as nn
from gin import config_parser

from bertjax import configurables
from bertjax.checkpoints import encoders
from bertjax.checkpoints.params import RUN_SUBDIR, load_params
from bertjax.hf import registry
from bertjax.checkpoints.model import HFModel
from bertjax.models import electra, spanbert

RUN_CONFIG_FILE = "config.gin"  # what bertjax.main writes into a model_dir

# Pretraining models released as another architecture: (that architecture, how to cut
# its params out of the run's). The cut params must fit that architecture.
_RELEASED_AS: dict[type, tuple[str, Callable[[dict], dict]]] = {
    spanbert.SpanBertForPreTraining: ("BertForMaskedLM", spanbert.bert_params),
    electra.ElectraGeneratorDiscriminator: ("ElectraForPreTraining", electra.discriminator_params),
    electra.ElectraReplacedMLM: ("ElectraForMaskedLM", electra.mlm_params),
    electra.ElectraAllTokensMLM: ("ElectraForMaskedLM", electra.mlm_params),
}


def model_dir_of(path: str) -> str | None:
  """The model_dir that `path` is, or whose checkpoints/ folder or step folder it is."""
  path = os.path.normpath(path)
  candidates = [path]
  if os.path.basename(path) == RUN_SUBDIR:
    candidates.append(os.path.dirname(path))
  elif os.path.basename(os.path.dirname(path)) == RUN_SUBDIR:
    candidates.append(os.path.dirname(os.path.dirname(path)))
  return next((c for c in candidates if os.path.isfile(os.path.join(c, RUN_CONFIG_FILE))), None)


def open_run(model_dir: str, weights_dir: str | None = None) -> tuple[HFModel, str]:
  """(the model the run trained, with its weights; where in the run they come from).

  `weights_dir`: the model_dir itself (its latest step), its checkpoints/ folder or one
  step folder. A distillation run gives its student, an ELECTRA run its discriminator (the
  Replace / All-Tokens MLM ablations: their MLM network).
  """
  config_path = os.path.join(model_dir, RUN_CONFIG_FILE)
  with open(config_path) as f:
    candidates = run_models(f.read(), config_path)
  params, metadata = load_params(weights_dir or model_dir)
  mismatches = []
  for scope, model in candidates:
    weights = params[scope] if scope and scope in params else params
    family = family_for_config(model.config)
    origin = [f"step {metadata.get('step')}"] + ([f"{scope}/ of the run"] if scope else [])
    architecture, module = type(model).__name__, model
    if type(model) in _RELEASED_AS:
      # (Checked after the cut: a module's init may leave out heads its run trained, as
      # SpanBERT's SBO head, built only when given the span features.)
      architecture, cut = _RELEASED_AS[type(model)]
      module, origin = family.make_module(architecture, model.config), origin + [
          f"cut from {type(model).__name__}"]
      try:
        weights = cut(weights)
      except KeyError:  # the weights of another model
        weights = None
    if weights is None or not encoders.fits(family, module, model.config, weights):
      mismatches.append(f"{scope or 'build_model'}: {type(model).__name__}")
      continue
    return HFModel(family, architecture, model.config, module, weights), ", ".join(origin)
  raise ValueError(f"The weights in {weights_dir or model_dir} fit none of the models that "
                   f"{config_path} builds ({'; '.join(mismatches)}); their top-level keys are "
                   f"{sorted(params)}. Was config.gin edited after the run?")


class _Reference(typing.NamedTuple):
  name: str


class _Delegate(config_parser.ParserDelegate):
  """Parses references and macros into placeholders instead of resolving them."""

  def configurable_reference(self, scoped_configurable_name, evaluate):
    return _Reference(scoped_configurable_name)

  def macro(self, macro_name):
    return _Reference("%" + macro_name)


def run_models(config_text: str, source: str = RUN_CONFIG_FILE) -> list[tuple[str, nn.Module]]:
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
    raise ValueError(f"{source} has no build_model bindings, so the run's model cannot be "
                     "rebuilt: give a `python -m bertjax.main` model_dir whose model gin file "
                     "binds build_model.architecture / build_model.config.")
  first = trainer_model.name.rpartition("/")[0] if isinstance(trainer_model, _Reference) else ""
  order = sorted(bindings, key=lambda s: (s != first, s != "student", s))
  models = []
  for scope in order:
    # Scoped bindings extend the unscoped ones, as gin applies them; dtype is the
    # caller's business.
    args = {k: resolve(v) for k, v in {**bindings.get("", {}), **bindings[scope]}.items()
            if k != "dtype"}
    if "architecture" in args and "config" in args:
      models.append((scope, configurables.build_model(**args)))
  if not models:
    raise ValueError(f"{source} binds no build_model.architecture / build_model.config.")
  return models


def family_for_config(config) -> Any:
  """The HF-bridge family whose base encoder is configured by `type(config)` (exactly,
  else by a base class: SpanBERT's config extends BERT's)."""
  matches = []
  for model_type in registry.FAMILIES:
    family = registry.family_for(model_type)
    base = encoders.base_architecture(family)
    if base is None:
      continue
    try:  # make_module only stores the config; a foreign one is caught by the type check
      config_type = typing.get_type_hints(type(family.make_module(base, config))).get("config")
    except (TypeError, AttributeError, KeyError, ValueError, NameError):
      continue
    if config_type is type(config):
      return family
    if isinstance(config_type, type) and isinstance(config, config_type):
      matches.append((len(config_type.__mro__), family))
  if not matches:
    raise ValueError(f"No model family has a base encoder for {type(config).__name__}.")
  return max(matches, key=lambda m: m[0])[1]


# The joint ELECTRA model as the two networks transformers ships:
# `bertjax.to_hf(export_discriminator(cfg, params), dir)`.
def export_discriminator(config: electra.ElectraConfig, params: dict) -> HFModel:
  """The discriminator of an ElectraGeneratorDiscriminator as an ElectraForPreTraining
  HFModel, ready for `bertjax.to_hf` (and for fine-tuning)."""
  return HFModel(registry.family_for("electra"), "ElectraForPreTraining", config,
                 electra.ElectraForPreTraining(config), electra.discriminator_params(params))


def export_generator(config: electra.ElectraConfig, params: dict) -> HFModel:
  """The generator of an ElectraGeneratorDiscriminator as an ElectraForMaskedLM HFModel."""
  gen_config = config.generator_config()
  return HFModel(registry.family_for("electra"), "ElectraForMaskedLM", gen_config,
                 electra.ElectraForMaskedLM(gen_config), electra.generator_params(params))
