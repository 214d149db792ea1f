"""Converted models on disk: a bertjax params checkpoint that remembers its HF origin.

Layout (see bertjax.checkpoints): DIR/params (Orbax) + DIR/metadata.json with
`family`, `architecture`, `hf_config` (enough to rebuild the module), `module_options`
(module fields set apart from the architecture's defaults, e.g. a bare encoder without
its pooler) and `config` (our dataclass, for gin / the trainer). Tokenizer files are
copied alongside so a converted directory is self-contained for encoding and fine-tuning.
Open one with `bertjax.open_model`, which reads every format.
"""
import dataclasses
import os
import pathlib
import shutil

import jax
import jax.numpy as jnp

from bertjax.checkpoints.params import METADATA_FILE, PARAMS_ITEM, load_params, save_params
from bertjax import files
from bertjax.hf import registry
from bertjax.checkpoints.model import HFModel

TOKENIZER_FILES = files.TOKENIZER_FILES  # copied alongside the weights


def save(model: HFModel, directory: str | os.PathLike, tokenizer_from: str | os.PathLike | None = None,
         source: str | None = None) -> None:
  metadata = {
      "family": model.family.name,
      "architecture": model.architecture,
      "hf_config": model.family.config_to_hf(model.config, model.architecture),
      "module_options": _module_options(model),
      "config": dataclasses.asdict(model.config),
      "source": source,
  }
  save_params(str(directory), model.params, metadata)
  if tokenizer_from is not None:
    copy_tokenizer_files(tokenizer_from, directory, model.architecture)


def load(directory: str | os.PathLike) -> HFModel:
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
  params, _ = load_params(str(directory))
  family = registry.family_by_name(metadata["family"])
  family.check_architecture(metadata["architecture"],
                            os.path.join(str(directory), METADATA_FILE))
  config = family.config_from_hf(metadata["hf_config"])
  module = family.make_module(metadata["architecture"], config).clone(
      **metadata.get("module_options", {}))
  return HFModel(family, metadata["architecture"], config, module,
                 jax.tree_util.tree_map(jnp.asarray, params))


def _module_options(model: HFModel) -> dict:
  """The module's plain fields whose values differ from the architecture's module."""
  default = model.family.make_module(model.architecture, model.config)
  if type(default) is not type(model.module):
    raise ValueError(f"The module is a {type(model.module).__name__}, not the "
                     f"{type(default).__name__} that architecture {model.architecture!r} names.")
  names = [f.name for f in dataclasses.fields(default)
           if f.name not in ("config", "parent", "name")]
  return {name: getattr(model.module, name) for name in names
          if isinstance(getattr(model.module, name), (bool, int, float, str))
          and getattr(model.module, name) != getattr(default, name)}


def copy_tokenizer_files(source: str | os.PathLike, target: str | os.PathLike,
                         architecture: str | None = None) -> list[str]:
  """Copies the tokenizer files of folder `source` to `target`, after checking them all
  (links leading out of `source`, binary vocabularies, broken JSON): on an error,
  nothing is copied. sentence-transformers' files go only with a bare encoder (an
  `architecture` such as BertModel, or None), not with a task class."""
  files.check_tokenizer_files(source)
  copied = []
  for name in TOKENIZER_FILES:
    if name in files.SENTENCE_MODEL_FILES and not files.embeds_sentences(architecture):
      continue
    path, destination = pathlib.Path(source) / name, pathlib.Path(target) / name
    if path.is_file():
      destination.parent.mkdir(parents=True, exist_ok=True)
      shutil.copyfile(path, destination)
      copied.append(name)
    elif path.is_dir():  # e.g. sentence-transformers' empty 2_Normalize/ marker folder
      # Every file under it is checked as it is copied: a link inside may lead out too.
      copy = lambda src, dst: shutil.copy2(files.inside(source, os.path.relpath(src, source)), dst)
      shutil.copytree(path, destination, dirs_exist_ok=True, copy_function=copy)
      copied.append(name)
  return copied
