"""Converted models on disk: a bertjax params checkpoint that remembers its HF origin.

Layout (see bertjax.checkpoints): DIR/params (Orbax), DIR/model.json (the model record:
family, architecture, config, module options, tokenizer and weights; written last,
bertjax.checkpoints.record) and DIR/metadata.json (the params checkpoint's free-form
metadata, as before the record: `family`, `architecture`, `hf_config`, `module_options`,
`config`, `source`). Tokenizer files are copied alongside so a converted directory is
self-contained for encoding and fine-tuning. Open one with `bertjax.open_model`, which
reads every format.
"""
import dataclasses
import os
import pathlib
import shutil

from bertjax.checkpoints import record
from bertjax.checkpoints.params import PARAMS_ITEM, save_params
from bertjax import files
from bertjax.checkpoints.model import HFModel

TOKENIZER_FILES = files.TOKENIZER_FILES  # copied alongside the weights


def save(model: HFModel, directory: str | os.PathLike, tokenizer_from: str | os.PathLike | None = None,
         source: str | None = None) -> None:
  """Writes `model` into `directory`: params/, metadata.json, the tokenizer files of
  `tokenizer_from`, and model.json last, once the rest is in place."""
  model_record = record.of_model(model, tokenizer=".", weights=PARAMS_ITEM, source=source)
  model_record.to_json()  # refused (a config that cannot come back) before anything is written
  if tokenizer_from is not None:
    files.check_tokenizer_files(tokenizer_from)  # likewise bad tokenizer files
  metadata = {
      "family": model.family.name,
      "architecture": model.architecture,
      "hf_config": model.family.config_to_hf(model.config, model.architecture),
      "module_options": model_record.module_options,
      "config": dataclasses.asdict(model.config),
      "source": source,
  }
  save_params(str(directory), model.params, metadata)
  if tokenizer_from is not None:
    copy_tokenizer_files(tokenizer_from, directory, model.architecture)
  record.write(directory, model_record)


def load(directory: str | os.PathLike) -> HFModel:
  """The model of a converted checkpoint: what its model.json describes (an older one's
  metadata.json, through `record.upgrade`)."""
  model_record, folder = record.find(directory)
  return record.open_record(model_record, folder)[0]


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
