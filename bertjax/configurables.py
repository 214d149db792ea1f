"""Gin-facing pieces of a run: the model factory and typed bindings.

Models are named by import path rather than registered with gin, so any family's
module and size constructor works without touching gin registries:

  build_model.architecture = 'bertjax.models.bert.BertForPreTraining'
  build_model.config = 'bertjax.models.bert.bert_mini'
  build_model.config_overrides = {'vocab_size': 8192, 'hidden_dropout': 0.0}
  build_model.dtype = 'bfloat16'      # compute dtype; parameters stay float32

gin does not check value types, nor `gin.REQUIRED` used as a default; `typechecked`
does both, from the signature, so a string where an int belongs or a binding left
out fails when the configurable is built - before any compute - naming the binding.
"""
import collections.abc
import dataclasses
import functools
import importlib
import inspect
import logging
import os
import re
import types
import typing
from typing import Any, Callable

import gin

from bertjax import paths


def _import(path: str, binding: str) -> Any:
  module_name, _, attr = path.rpartition(".")
  try:
    return getattr(importlib.import_module(module_name), attr)
  except (ImportError, AttributeError, ValueError) as e:
    raise ValueError(f"gin binding {binding} = {path!r}: cannot import it ({e}). "
                     f"Give a full path such as 'bertjax.models.bert.bert_base'.") from None


def _accepts(value: Any, annotation: Any) -> bool:
  """True when `value` fits a (simple) annotation; unknown annotations accept anything."""
  if annotation is inspect.Parameter.empty or annotation is Any:
    return True
  origin = typing.get_origin(annotation)
  if origin in (typing.Union, types.UnionType):
    return any(_accepts(value, a) for a in typing.get_args(annotation))
  if annotation is type(None):
    return value is None
  if annotation is float:
    return isinstance(value, (int, float)) and not isinstance(value, bool)
  if annotation is int:
    return isinstance(value, int) and not isinstance(value, bool)
  if annotation in (str, bool):
    return isinstance(value, annotation)
  if origin in (tuple, list, collections.abc.Sequence):
    return isinstance(value, (tuple, list))
  if origin is dict or annotation is dict:
    return isinstance(value, dict)
  return True


def typechecked(fn: Callable) -> Callable:
  """Checks arguments against `fn`'s annotations; errors name the gin binding."""
  signature = inspect.signature(fn)
  hints = typing.get_type_hints(fn)
  name = fn.__qualname__.replace(".__init__", "")

  @functools.wraps(fn)
  def wrapper(*args, **kwargs):
    bound = signature.bind(*args, **kwargs)
    bound.apply_defaults()
    missing = [a for a, v in bound.arguments.items() if v is gin.REQUIRED]
    if missing:
      raise ValueError(f"Missing required gin binding(s): "
                       f"{', '.join(f'{name}.{a}' for a in missing)}.")
    for arg, value in bound.arguments.items():
      if arg == "self":
        continue
      if not _accepts(value, hints.get(arg, inspect.Parameter.empty)):
        raise ValueError(f"gin binding {name}.{arg} = {value!r}: expected "
                         f"{_describe(hints[arg])}, got {type(value).__name__}.")
    return fn(*args, **kwargs)

  return wrapper


def _describe(annotation: Any) -> str:
  return getattr(annotation, "__name__", None) or str(annotation).replace("typing.", "")


@gin.configurable
@typechecked
def build_model(architecture: str = gin.REQUIRED, config: str = gin.REQUIRED,
                config_overrides: dict | None = None, dtype: str | None = None):
  """`architecture(config(**config_overrides))`, with the compute dtype set on the config."""
  module_cls = _import(architecture, "build_model.architecture")
  make_config = _import(config, "build_model.config")
  cfg = make_config()
  overrides = dict(config_overrides or {})
  if dtype is not None:
    overrides["dtype"] = dtype
  if dataclasses.is_dataclass(cfg):
    fields = {f.name: f.type for f in dataclasses.fields(cfg)}
    unknown = sorted(set(overrides) - set(fields))
    if unknown:
      renames = RENAMED_FIELDS.get(type(cfg).__name__, {})
      hints = "".join(f" ({k!r} was renamed {renames[k]!r})" for k in unknown if k in renames)
      raise ValueError(f"gin binding build_model.config_overrides: {unknown} are not fields "
                       f"of {type(cfg).__name__}{hints}; known fields: {sorted(fields)}.")
    for key, value in overrides.items():
      default = getattr(cfg, key)
      if default is not None and not _accepts(value, type(default)):
        raise ValueError(f"gin binding build_model.config_overrides[{key!r}] = {value!r}: "
                         f"expected {type(default).__name__}.")
    cfg = dataclasses.replace(cfg, **overrides)
  elif overrides:
    raise ValueError(f"{config} returned a {type(cfg).__name__}, not a dataclass; "
                     f"config_overrides cannot be applied.")
  return module_cls(cfg)


def parse_config(gin_files: list[str], bindings: list[str]) -> None:
  """Parses gin files (as given, else under the working directory, else under the
  repository's gin/ folder) and then the bindings.

  gin logs an error for every search path a file is *not* under, even when a later one
  has it; a file found nowhere still raises, so those messages are only noise and are
  silenced while parsing. Files that include each other in a cycle are refused naming the
  cycle (gin itself would recurse until Python gives up).
  """
  search = [os.getcwd(), str(paths.gin_dir())]
  for folder in search:
    gin.add_config_file_search_path(folder)
  cycle = include_cycle(gin_files, search)
  if cycle:
    raise ValueError("gin files include each other in a cycle: " + " -> ".join(cycle)
                     + "; remove one of those includes.")
  root = logging.getLogger()
  level = root.level
  root.setLevel(logging.CRITICAL)
  try:
    gin.parse_config_files_and_bindings(gin_files, bindings)
  except ValueError as e:
    macro = re.match(r"No bindings specified for '(\w+)/gin.macro'", str(e))
    if macro is None:
      raise
    name = macro.group(1)
    raise ValueError(f"gin macro {name} is used (%{name}) in {gin_files} but never set; "
                     f"give it, e.g. --gin_bindings=\"{name} = '...'\" (the gin file that "
                     f"uses it says what it means).") from None
  finally:
    root.setLevel(level)


def _tolerant(exists):
  """A gin file reader's existence check that says "no" instead of raising TypeError.

  gin's reader of files inside Python packages takes `include 'runs/pretrain.gin'` as the
  package `runs`: where the working directory holds a `runs/` folder (a namespace package,
  which has no file), it raises TypeError from deep inside gin instead of moving on to
  the next place to look."""
  def check(path):
    try:
      return exists(path)
    except TypeError:
      return False
  return check


gin.config._FILE_READERS[:] = [  # pylint: disable=protected-access
    (reader, _tolerant(exists)) for reader, exists in gin.config._FILE_READERS]  # pylint: disable=protected-access

_INCLUDE = re.compile(r"""^\s*include\s+['"]([^'"]+)['"]""", re.MULTILINE)


def _resolve(name: str, search: list[str], including: str | None) -> str | None:
  """Where gin finds an included or given file: as given, beside the file that includes
  it, then under each search folder."""
  candidates = [name] + ([os.path.join(os.path.dirname(including), name)] if including else [])
  candidates += [os.path.join(folder, name) for folder in search]
  return next((os.path.abspath(c) for c in candidates if os.path.isfile(c)), None)


def include_cycle(gin_files: list[str], search: list[str]) -> list[str] | None:
  """The first chain of `include`s that comes back to a file it left, or None."""
  def visit(path: str, chain: list[str]) -> list[str] | None:
    if path in chain:
      return chain[chain.index(path):] + [path]
    with open(path, encoding="utf-8", errors="replace") as f:
      includes = _INCLUDE.findall(f.read())
    for name in includes:
      found = _resolve(name, search, path)
      if found is not None:
        cycle = visit(found, chain + [path])
        if cycle:
          return cycle
    return None

  for name in gin_files:
    found = _resolve(name, search, None)
    if found is not None:
      cycle = visit(found, [])
      if cycle:
        return cycle
  return None


# ------------------------------------------------------------------ renamed config fields
# Every family calls its feed-forward activation `hidden_act`, the dropout on its hidden
# states `hidden_dropout` (for the families with a single rate, the one rate they apply
# everywhere) and the standard deviation of its normal initializers `initializer_range`.
# Distinct concepts keep their own names: T5's `initializer_factor` (a multiplier of
# per-layer scales, not a standard deviation), BART's `activation_dropout`, the task heads'
# `classifier_activation` / `pooler_hidden_act` / `summary_activation`, BiLSTM's
# `embedding_init_std`.
#
# RENAMED_FIELDS is the one table of the old names: a config a run stored on disk
# (model.json, model_config.json, a pre-record run's config.gin, a distilled student's
# metadata.json) is read with them translated, while a gin override that uses one is
# refused naming the new field.
RENAMED_FIELDS: dict[str, dict[str, str]] = {  # config class name -> {old name: new name}
    "GPTConfig": {"activation": "hidden_act", "init_std": "initializer_range"},
    "BartConfig": {"activation": "hidden_act", "dropout": "hidden_dropout",
                   "init_std": "initializer_range"},
    "T5Config": {"activation": "hidden_act", "dropout_rate": "hidden_dropout"},
    "XLNetConfig": {"dropout": "hidden_dropout"},
    "ElmoConfig": {"dropout": "hidden_dropout", "init_std": "initializer_range"},
    "WordTransformerConfig": {"dropout_rate": "hidden_dropout"},
    "BiLSTMConfig": {"dropout_rate": "hidden_dropout"},
}


def upgrade_fields(config_class: str, fields: dict[str, Any]) -> dict[str, Any]:
  """A stored config's {field: value} with the old names of `config_class`'s (a class
  name) fields replaced by the new ones (a field stored under both keeps the new one's)."""
  renames = RENAMED_FIELDS.get(config_class, {})
  upgraded = {k: v for k, v in fields.items() if k not in renames}
  for old, new in renames.items():
    if old in fields:
      upgraded.setdefault(new, fields[old])
  return upgraded


def upgrade_flat_fields(flat: dict[str, Any]) -> dict[str, Any]:
  """{dotted name: value} (checkpoints.model_record.describe) with the renamed fields' old
  names replaced: the config at prefix `p.` is named by its `p.type` entry."""
  upgraded = dict(flat)
  for key, config_class in flat.items():
    if (key == "type" or key.endswith(".type")) and isinstance(config_class, str):
      prefix = key[:-len("type")]
      for old, new in RENAMED_FIELDS.get(config_class, {}).items():
        if prefix + old in upgraded:
          upgraded.setdefault(prefix + new, upgraded.pop(prefix + old))
  return upgraded


def stored_overrides(config: str, config_overrides: dict | None) -> dict | None:
  """A stored run's `build_model.config_overrides` (its config.gin) with the old names of
  renamed config fields replaced by the new ones."""
  if not config_overrides:
    return config_overrides
  config_class = type(_import(config, "build_model.config")()).__name__
  return upgrade_fields(config_class, dict(config_overrides))
