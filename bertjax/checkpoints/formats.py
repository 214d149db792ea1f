"""Every on-disk model format behind one `open_model(path)`.

  model = bertjax.open_model(path)        # any format below
  model(input_ids=ids)["last_hidden_state"]
  encoder = encoders.base_encoder(model)   # the bare encoder, for task heads

`path` may be
- a folder bertjax wrote: its model.json (bertjax.checkpoints.record) says what the model
  is and where its weights are: a converted checkpoint (params/, from `python -m
  bertjax.convert`, fine-tuning, an SBERT export, the tools) or a `python -m bertjax.main`
  model_dir (checkpoints/), its checkpoints/ folder (the latest step) or one step folder
  (that step): the model the run trained. Such folders written before the record
  (params/ + metadata.json; config.gin + checkpoints/) open through `record.upgrade`;
- a Hugging Face model folder: config.json + model.safetensors / pytorch_model.bin;
- a sentence-transformers folder whose modules.json puts the transformer in a subfolder
  (0_Transformer/); newer ones keep it at the top, where it is a Hugging Face folder.
"""
import dataclasses
import os

from bertjax.checkpoints import legacy, record
from bertjax.checkpoints.model import HFModel, from_hf
from bertjax.checkpoints.params import METADATA_FILE, PARAMS_ITEM
from bertjax import files
from bertjax.hf import io as hf_io

SENTENCE_MODULES_FILE = "modules.json"
FORMATS = (f"a converted checkpoint ({PARAMS_ITEM}/ + {METADATA_FILE} + {record.FILE}, from "
           "`python -m bertjax.convert --from_hf=DIR --out=DIR`)",
           f"a Hugging Face folder ({hf_io.CONFIG_FILE} + {hf_io.SAFETENSORS_FILE} or "
           f"{hf_io.TORCH_FILE})",
           f"a sentence-transformers folder ({SENTENCE_MODULES_FILE} naming its Transformer "
           "folder)",
           f"a `python -m bertjax.main` model_dir ({legacy.RUN_CONFIG_FILE} + checkpoints/ + "
           f"{record.FILE}, "
           "or its checkpoints/ or one step folder)")


def open_model(path, tokenizer_dir=None) -> HFModel:
  """The model stored at `path`, in any format above.

  Its `tokenizer_dir` is `tokenizer_dir` when given, else the folder holding the model's
  tokenizer files (for a bertjax.main run: its model_dir, where the run writes the
  vocabulary it trained on).
  """
  path = os.fspath(path)
  if os.path.isfile(path):
    raise FileNotFoundError(f"{path!r} is a file; open_model takes the folder holding a model: "
                            f"{_one_of()}.")
  if not os.path.isdir(path):
    raise FileNotFoundError(f"No folder at {path!r}; open_model takes {_one_of()}.")
  if tokenizer_dir is not None and not os.path.isdir(tokenizer_dir):
    raise FileNotFoundError(f"tokenizer_dir {os.fspath(tokenizer_dir)!r} is not a folder; give "
                            "the one holding vocab.txt / tokenizer.json.")
  model, origin, files = _read(path)
  tokenizer_dir = tokenizer_dir or files
  return dataclasses.replace(model, tokenizer_dir=None if tokenizer_dir is None
                             else os.fspath(tokenizer_dir),
                             source=path, origin=origin)


def _read(path: str) -> tuple[HFModel, str, str]:
  """(model, what it is at `path`, the folder of its tokenizer files)."""
  folder = record.locate(path)
  if folder is not None:
    return record.open_record(record.read(folder), folder, path)
  converted = (os.path.isdir(os.path.join(path, PARAMS_ITEM))
               and os.path.isfile(os.path.join(path, METADATA_FILE)))
  hf_folder = os.path.isfile(os.path.join(path, hf_io.CONFIG_FILE))
  if converted or (not hf_folder and legacy.model_dir_of(path) is not None):
    model_record, folder = record.upgrade(path)  # written before the record
    return record.open_record(model_record, folder, path)
  if hf_folder:
    return from_hf(path), "Hugging Face folder", path
  transformer = _sentence_transformer_folder(path)
  if transformer is not None:
    model, origin, files = _read(transformer)
    return model, f"{origin} {os.path.basename(transformer)}/ of a sentence model", files
  listing = sorted(os.listdir(path))
  raise FileNotFoundError(
      f"{path!r} is neither {', '.join(FORMATS[:-1])} nor {FORMATS[-1]}; it holds "
      f"{listing[:12] + ['...'] if len(listing) > 12 else listing}.")


def _sentence_transformer_folder(path: str) -> str | None:
  """The subfolder holding the transformer of a sentence-transformers folder, if any."""
  modules_file = files.inside(path, SENTENCE_MODULES_FILE)
  if not os.path.isfile(modules_file):
    return None
  modules = files.read_json(modules_file, "sentence-transformers' list of modules", list)
  folders = [m.get("path") for m in modules
             if isinstance(m, dict) and str(m.get("type", "")).endswith("Transformer")]
  if not folders:
    raise ValueError(f"{modules_file} lists no sentence_transformers.models.Transformer module; "
                     "open_model needs one to find the model's weights.")
  folder = os.fspath(files.inside(path, str(folders[0] or "")))
  if not folders[0] or not os.path.isdir(folder):
    raise FileNotFoundError(f"{modules_file} puts the transformer in {folder!r}, which holds "
                            f"neither {FORMATS[0]} nor {FORMATS[1]}.")
  return folder


def _one_of() -> str:
  return "one of: " + "; ".join(FORMATS)
