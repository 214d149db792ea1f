"""Folders written before the model record (bertjax.checkpoints.record), read only by
`record.upgrade`: a converted checkpoint's metadata.json, and a `python -m bertjax.main`
model_dir's config.gin, whose `build_model` bindings are read with gin's parser, not
applied (the caller's own gin config stays untouched)."""
import os
import typing
from typing import Any

import flax.linen as nn
from gin import config_parser

from bertjax import configurables, files
from bertjax.checkpoints.params import METADATA_FILE, PARAMS_ITEM, folder_holding
from bertjax.hf import registry

RUN_CONFIG_FILE = "config.gin"  # what bertjax.main writes into a model_dir


def model_dir_of(path: str) -> str | None:
  """The model_dir that `path` is, or whose checkpoints/ folder or step folder it is."""
  return folder_holding(path, RUN_CONFIG_FILE)


def converted_metadata(directory: str) -> tuple[Any, str, Any, dict, str | None]:
  """(family, architecture, config, module_options, source) of a converted checkpoint's
  metadata.json, as `python -m bertjax.convert` wrote it before the record."""
  files.inside(directory, PARAMS_ITEM)
  metadata_file = files.inside(directory, METADATA_FILE)
  metadata = files.read_json(metadata_file, "a converted checkpoint's metadata (family, "
                             "architecture, hf_config), as `python -m bertjax.convert` writes it")
  for key, kind in (("family", str), ("architecture", str), ("hf_config", dict)):
    if not isinstance(metadata.get(key), kind):
      found = "no" if key not in metadata else f"a {type(metadata[key]).__name__} as"
      raise ValueError(f"{metadata_file} has {found} {key!r} (expected a {kind.__name__}): this "
                       "checkpoint was not written by `python -m bertjax.convert`; convert it "
                       "(or export from the run) first.")
  family = registry.family_by_name(metadata["family"])
  family.check_architecture(metadata["architecture"], os.fspath(metadata_file))
  config = family.config_from_hf(metadata["hf_config"])
  return (family, metadata["architecture"], config, dict(metadata.get("module_options", {})),
          metadata.get("source"))


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
      if "config_overrides" in args:  # written before a config field was renamed?
        args["config_overrides"] = configurables.stored_overrides(args["config"],
                                                                  args["config_overrides"])
      models.append((scope, configurables.build_model(**args)))
  if not models:
    raise ValueError(f"{source} binds no build_model.architecture / build_model.config.")
  return models
