"""The one record of the model a folder holds: `model.json`, beside the weights.

Every producer writes it: the trainer (in a `python -m bertjax.main` model_dir),
`convert` (and through it fine-tuning's saved model and SBERT's export), the tools
(DistilBERT's init, ELECTRA's stage two). `open_model` reads it and nothing else:

  {"version": 1,
   "family": "electra",                        # Family.name (bertjax.hf.registry)
   "architecture": "ElectraForPreTraining",    # the transformers class our module implements
   "config": {"class": "bertjax.models.electra.model.ElectraConfig",
              "fields": {"hidden_size": 256, "labels": ["LABEL_0", "LABEL_1"], ...}},
   "module_options": {},                       # module fields unlike the architecture's
   "dtype": "bfloat16",                        # the compute dtype it was trained / run in
   "tokenizer": ".",                           # folder of its tokenizer files, inside this one
   "weights": {"folder": "checkpoints",        # 'params' (a params checkpoint) or a run's steps
               "subtree": null,                # e.g. 'student' of a distillation run
               "cut_from": "bertjax.models.electra.model.ElectraGeneratorDiscriminator"},
   "source": null}

Config fields are JSON: arrays come back as tuples (configs are frozen and hashable), a
nested config object (BERT's `attention` spec) as {"class", "fields"}; classes are
named by their import path and must be inside the bertjax package. A config that would
not come back equal is refused when written. `dtype` is not a config field here: an
opened model computes in its config's default (float32), as the weights are stored.
`cut_from`: the pretraining module the run trained, which declares the architecture it
is released as (`RELEASED_AS`) and how its params are cut to it (`release`).

Folders written before the record (a converted checkpoint's metadata.json, a run's
config.gin) open through `upgrade`, the one place that reads those (`legacy`).
"""
import dataclasses
import importlib
import json
import os
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp

from bertjax import configurables, files
from bertjax.checkpoints import encoders, legacy
from bertjax.checkpoints.model import HFModel
from bertjax.checkpoints.params import (METADATA_FILE, PARAMS_ITEM, RUN_SUBDIR,
                                        folder_holding, load_params)
from bertjax.hf import registry
from bertjax.models.common.distillation import StudentTeacher

FILE = "model.json"
VERSION = 1
PACKAGE = "bertjax."
WEIGHT_FOLDERS = (PARAMS_ITEM, RUN_SUBDIR)
_KEYS = ("version", "family", "architecture", "config", "weights")


@dataclasses.dataclass(frozen=True)
class Record:
  family: str
  architecture: str
  config: Any                       # the config dataclass itself
  module_options: dict = dataclasses.field(default_factory=dict)
  dtype: str | None = None
  tokenizer: str | None = "."
  weights: str = PARAMS_ITEM        # one of WEIGHT_FOLDERS
  subtree: str | None = None
  cut_from: str | None = None       # import path of the pretraining module the weights are cut from
  source: str | None = None

  def to_json(self) -> dict:
    return {"version": VERSION, "family": self.family, "architecture": self.architecture,
            "config": encode_config(self.config), "module_options": dict(self.module_options),
            "dtype": self.dtype, "tokenizer": self.tokenizer,
            "weights": {"folder": self.weights, "subtree": self.subtree,
                        "cut_from": self.cut_from},
            "source": self.source}


# ----------------------------------------------------------------------------- configs
def _path(obj: Any) -> str:
  return f"{obj.__module__}.{obj.__qualname__}"


def _import(path: Any, what: str, where: str) -> Any:
  """The object at import path `path`, which must lie inside the bertjax package."""
  if not isinstance(path, str) or not path.startswith(PACKAGE):
    raise ValueError(f"{where}: {what} {path!r} is not inside the bertjax package; a model "
                     "record only names bertjax's own classes. Rewrite the folder's record with "
                     "the bertjax that made it, or remove it and convert the model again.")
  module_name, _, name = path.rpartition(".")
  try:
    return getattr(importlib.import_module(module_name), name)
  except (ImportError, AttributeError, ValueError) as e:
    raise ValueError(f"{where}: {what} {path!r} cannot be imported ({e}); the record was "
                     "written by another version of bertjax.") from None


def _encode(value: Any, name: str) -> Any:
  if value is None or isinstance(value, (bool, int, float, str)):
    return value
  if isinstance(value, tuple):
    return [_encode(v, f"{name}[{i}]") for i, v in enumerate(value)]
  if dataclasses.is_dataclass(value) and not isinstance(value, type):
    if not type(value).__module__.startswith(PACKAGE):
      raise ValueError(f"Config field {name} is a {_path(type(value))}, outside the bertjax "
                       "package, so a model record cannot name it.")
    return {"class": _path(type(value)),
            "fields": {f.name: _encode(getattr(value, f.name), f"{name}.{f.name}")
                       for f in dataclasses.fields(value)}}
  raise ValueError(f"Config field {name} = {value!r} ({type(value).__name__}) has no JSON form "
                   "that a model record can bring back; give it a plain value, a tuple or a "
                   "bertjax dataclass.")


def _decode(value: Any, where: str) -> Any:
  if isinstance(value, list):
    return tuple(_decode(v, where) for v in value)
  if isinstance(value, dict):
    if set(value) != {"class", "fields"} or not isinstance(value["fields"], dict):
      raise ValueError(f"{where}: a config value {value!r} is neither plain nor a "
                       "{'class', 'fields'} object.")
    return _build(value["class"], value["fields"], where)
  return value


def _build(class_path: Any, fields: Any, where: str) -> Any:
  cls = _import(class_path, "config class", where)
  if not (isinstance(cls, type) and dataclasses.is_dataclass(cls)):
    raise ValueError(f"{where}: config class {class_path!r} is not a config dataclass.")
  if not isinstance(fields, dict):
    raise ValueError(f"{where}: the fields of {class_path} are a {type(fields).__name__}, "
                     "not an object.")
  fields = configurables.upgrade_fields(cls.__name__, fields)  # a record written before a rename
  known = {f.name for f in dataclasses.fields(cls) if f.init}
  unknown = sorted(set(fields) - known)
  if unknown:
    raise ValueError(f"{where}: {unknown} are not fields of {class_path} (it has "
                     f"{sorted(known)}); the record was written by another version of bertjax.")
  try:  # fields left out take the class's defaults (a field added since)
    return cls(**{k: _decode(v, where) for k, v in fields.items()})
  except (TypeError, ValueError) as e:
    raise ValueError(f"{where}: its config does not build a {cls.__name__}: {e}") from None


def encode_config(config: Any) -> dict:
  """{'class', 'fields'} of a config dataclass (without its compute dtype); refused
  unless it builds an equal config back."""
  if not dataclasses.is_dataclass(config) or isinstance(config, type):
    raise ValueError(f"A model record holds a config dataclass, not a {type(config).__name__}.")
  encoded = _encode(config, "config")
  encoded["fields"].pop("dtype", None)
  back = _build(encoded["class"], encoded["fields"], "the record being written")
  differ = [f.name for f in dataclasses.fields(config)
            if f.name != "dtype" and getattr(back, f.name) != getattr(config, f.name)]
  if differ:
    raise ValueError(f"The {type(config).__name__} fields {differ} do not come back equal "
                     "from a model record; nothing was written.")
  return encoded


# ----------------------------------------------------------------------------- producers
def module_options(family, architecture: str, config: Any, module: nn.Module) -> dict:
  """The module's plain fields whose values differ from the architecture's module."""
  default = family.make_module(architecture, config)
  if type(default) is not type(module):
    raise ValueError(f"The module is a {type(module).__name__}, not the "
                     f"{type(default).__name__} that architecture {architecture!r} names.")
  names = [f.name for f in dataclasses.fields(default)
           if f.name not in ("config", "parent", "name")]
  return {name: getattr(module, name) for name in names
          if isinstance(getattr(module, name), (bool, int, float, str))
          and getattr(module, name) != getattr(default, name)}


def of_model(model: HFModel, **where: Any) -> Record:
  """The record of an HFModel (convert, fine-tuning, SBERT); `where`: the Record fields
  saying where its weights and tokenizer are, and its source."""
  return Record(model.family.name, model.architecture, model.config,
                module_options(model.family, model.architecture, model.config, model.module),
                getattr(model.config, "dtype", None), **where)


def architecture_of(family, module: nn.Module) -> str | None:
  """The family's transformers class that `module` implements (its own name first: the
  families whose modules are BERT's name them their own way, BigBirdForMaskedLM)."""
  names = sorted(family.architectures, key=lambda a: a != type(module).__name__)
  for name in names:
    try:
      if type(family.make_module(name, module.config)) is type(module):
        return name
    except (ValueError, KeyError, TypeError, AttributeError):
      continue
  return None


def of_trained(module: nn.Module) -> Record | None:
  """The record of what a `python -m bertjax.main` run trains, or None when open_model
  could not give it (a model without a family, e.g. ELMo): a distillation pair's
  student, a pretraining module as the architecture it declares it is released as."""
  subtree = None
  if isinstance(module, StudentTeacher):
    module, subtree = module.student, "student"
  config = getattr(module, "config", None)
  if not dataclasses.is_dataclass(config):
    return None
  try:
    family = registry.family_for_config(config)
  except ValueError:
    return None
  cut_from, options = None, {}
  if getattr(type(module), "RELEASED_AS", None):
    architecture, cut_from = type(module).RELEASED_AS, _path(type(module))
  else:
    architecture = architecture_of(family, module)
    if architecture is None:
      return None
    options = module_options(family, architecture, config, module)
  return Record(family.name, architecture, config, options, getattr(config, "dtype", None),
                tokenizer=".", weights=RUN_SUBDIR, subtree=subtree, cut_from=cut_from)


def write(folder: str | os.PathLike, record: Record) -> str:
  """Writes `record` as folder/model.json, whole or not at all (tmp + rename); on the
  first host only, as the weights' metadata."""
  text = json.dumps(record.to_json(), indent=1, sort_keys=True, default=str)
  path = os.path.join(os.fspath(folder), FILE)
  if jax.process_index() != 0:
    return path
  partial = path + ".partial"
  with open(partial, "w") as f:
    f.write(text)
  os.replace(partial, path)
  return path


# ----------------------------------------------------------------------------- reading
def read(folder: str | os.PathLike) -> Record:
  """The record in `folder`, checked: errors name the file and what to do."""
  path = os.fspath(files.inside(folder, FILE))
  data = files.read_json(path, "the model record (family, architecture, config, weights) "
                         "that bertjax writes beside a model's weights")
  fix = ("Restore the file as bertjax wrote it, or delete it to open the folder as its older "
         "format (a converted checkpoint's metadata.json, a run's config.gin).")
  missing = [k for k in _KEYS if k not in data]
  if missing:
    raise ValueError(f"{path} has no {missing}. {fix}")
  if data["version"] != VERSION:
    raise ValueError(f"{path} is version {data['version']!r} of the model record; this bertjax "
                     f"reads version {VERSION}. {fix}")
  for key, kind in (("family", str), ("architecture", str), ("config", dict), ("weights", dict),
                    ("module_options", dict)):
    if key in data and not isinstance(data[key], kind):
      raise ValueError(f"{path}: {key!r} is a {type(data[key]).__name__}, not a "
                       f"{kind.__name__}. {fix}")
  try:
    family = registry.family_by_name(data["family"])
  except ValueError as e:
    raise ValueError(f"{path}: {e} {fix}") from None
  family.check_architecture(data["architecture"], path)
  if set(data["config"]) != {"class", "fields"}:
    raise ValueError(f"{path}: 'config' holds {sorted(data['config'])}, not 'class' and "
                     f"'fields'. {fix}")
  config = _build(data["config"]["class"], data["config"]["fields"], path)
  weights = data["weights"]
  if weights.get("folder") not in WEIGHT_FOLDERS:
    raise ValueError(f"{path}: weights folder {weights.get('folder')!r} is not one of "
                     f"{WEIGHT_FOLDERS}. {fix}")
  cut_from = weights.get("cut_from")
  if cut_from is not None:
    trained = _import(cut_from, "cut_from module", path)
    if getattr(trained, "RELEASED_AS", None) != data["architecture"]:
      raise ValueError(f"{path}: {cut_from} is not released as {data['architecture']!r}. {fix}")
  tokenizer = data.get("tokenizer", ".")
  if tokenizer is not None and not (isinstance(tokenizer, str) and os.path.commonpath(
      [os.path.realpath(folder), os.path.realpath(os.path.join(folder, tokenizer))])
                                    == os.path.realpath(folder)):
    raise ValueError(f"{path}: tokenizer folder {tokenizer!r} is not a folder inside "
                     f"{os.fspath(folder)}; a record names its tokenizer files' folder relative "
                     f"to its own. {fix}")
  return Record(data["family"], data["architecture"], config, data.get("module_options", {}),
                data.get("dtype"), tokenizer, weights["folder"], weights.get("subtree"),
                cut_from, data.get("source"))


def locate(path: str | os.PathLike) -> str | None:
  """The folder whose model.json describes `path`: `path`, or for a run's checkpoints/
  folder or step folder, the run's model_dir."""
  return folder_holding(path, FILE)


def find(path: str | os.PathLike) -> tuple[Record, str]:
  """(the record describing `path`, the folder it belongs to): its model.json, else the
  one an older folder implies (`upgrade`)."""
  folder = locate(path)
  if folder is not None:
    return read(folder), folder
  return upgrade(path)


def open_record(record: Record, folder: str, weights_dir: str | None = None
                ) -> tuple[HFModel, str, str | None]:
  """(the model `record` describes, what it is, its tokenizer folder); `weights_dir`: a
  run's checkpoints/ or step folder to read instead of the latest step."""
  family = registry.family_by_name(record.family)
  module = family.make_module(record.architecture, record.config)
  if record.module_options:
    module = module.clone(**record.module_options)
  tokenizer = None if record.tokenizer is None else os.path.normpath(
      os.path.join(folder, record.tokenizer))
  if record.weights == PARAMS_ITEM:
    params, _ = load_params(folder) if os.path.isdir(os.path.join(folder, PARAMS_ITEM)) else (
        _missing(folder, record))
    origin = ["converted checkpoint"]
  else:
    params, metadata = load_params(weights_dir or folder)
    origin = [f"step {metadata.get('step')}"]
  if record.subtree:
    if record.subtree not in params:
      raise ValueError(f"{os.path.join(folder, FILE)} puts the model under {record.subtree}/ of "
                       f"the weights, which hold {sorted(params)}.")
    params, origin = params[record.subtree], origin + [f"{record.subtree}/ of the run"]
  if record.cut_from:
    trained = _import(record.cut_from, "cut_from module", os.path.join(folder, FILE))
    try:
      params = trained.release(params)
    except KeyError:  # the weights of another model
      params = None
    origin.append(f"cut from {trained.__name__}")
  if record.weights == RUN_SUBDIR and (
      params is None or not encoders.fits(family, module, record.config, params)):
    keys = sorted(params) if isinstance(params, dict) else params
    raise ValueError(f"The weights in {weights_dir or folder} do not fit the "
                     f"{record.architecture} that {os.path.join(folder, FILE)} describes; "
                     f"their top-level keys are {keys}. Was the record edited after the run?")
  model = HFModel(family, record.architecture, record.config, module,
                  jax.tree_util.tree_map(jnp.asarray, params))
  return model, ", ".join(origin), tokenizer


def _missing(folder: str, record: Record):
  raise FileNotFoundError(f"{os.path.join(folder, FILE)} puts the weights in {PARAMS_ITEM}/, "
                          f"but {folder} has no {PARAMS_ITEM}/ folder.")


# ----------------------------------------------------------------------------- old folders
def upgrade(path: str | os.PathLike) -> tuple[Record, str]:
  """(the record an old folder implies, the folder it belongs in). The one way folders
  written before model.json open: a converted checkpoint's metadata.json (its
  hf_config), or a run's config.gin (its build_model bindings, read with gin's parser;
  the first model whose weights fit)."""
  path = os.fspath(path)
  if (os.path.isdir(os.path.join(path, PARAMS_ITEM))
      and os.path.isfile(os.path.join(path, METADATA_FILE))):
    family, architecture, config, options, source = legacy.converted_metadata(path)
    return Record(family.name, architecture, config, options, getattr(config, "dtype", None),
                  ".", PARAMS_ITEM, source=source), path
  model_dir = legacy.model_dir_of(path)
  if model_dir is None:
    raise FileNotFoundError(f"{path!r} is neither a converted checkpoint ({PARAMS_ITEM}/ + "
                            f"{METADATA_FILE}) nor a run's model_dir ({legacy.RUN_CONFIG_FILE}).")
  config_path = os.path.join(model_dir, legacy.RUN_CONFIG_FILE)
  with open(config_path) as f:
    candidates = legacy.run_models(f.read(), config_path)
  params, _ = load_params(path)
  mismatches = []
  for scope, module in candidates:
    record = of_trained(module)
    weights = params[scope] if scope and scope in params else params
    if record is not None:
      record = dataclasses.replace(record, subtree=scope if scope and scope in params else None)
      if record.cut_from:
        try:
          weights = type(module).release(weights)
        except KeyError:
          weights = None
      family = registry.family_by_name(record.family)
      fitted = family.make_module(record.architecture, record.config)
      if weights is not None and encoders.fits(family, fitted, record.config, weights):
        return record, model_dir
    mismatches.append(f"{scope or 'build_model'}: {type(module).__name__}")
  raise ValueError(f"The weights in {path} fit none of the models that {config_path} builds "
                   f"({'; '.join(mismatches)}); their top-level keys are {sorted(params)}. Was "
                   "config.gin edited after the run?")
