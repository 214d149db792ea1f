"""Reading and writing Hugging Face model directories (local files only)."""
import json
import os
import pathlib
import tempfile
from typing import Mapping

import numpy as np

CONFIG_FILE = "config.json"
SAFETENSORS_FILE = "model.safetensors"
SAFETENSORS_INDEX = "model.safetensors.index.json"
TORCH_FILE = "pytorch_model.bin"
TORCH_INDEX = "pytorch_model.bin.index.json"


def read_config(path: str | os.PathLike) -> dict:
  directory = pathlib.Path(path)
  if not directory.is_dir():
    raise FileNotFoundError(f"{directory} is not a directory; from_hf expects a local Hugging Face "
                            f"model directory holding {CONFIG_FILE} and the weights.")
  config_path = directory / CONFIG_FILE
  if not config_path.is_file():
    raise FileNotFoundError(f"{config_path} not found: a Hugging Face model directory needs "
                            f"{CONFIG_FILE} next to {SAFETENSORS_FILE} or {TORCH_FILE}.")
  try:
    return json.loads(config_path.read_text())
  except json.JSONDecodeError as e:
    raise ValueError(f"{config_path} is not valid JSON: {e}") from None


def load_state_dict(path: str | os.PathLike) -> tuple[dict[str, np.ndarray], str]:
  """All tensors of a model directory as float32/int numpy arrays, and the file(s) they came from.

  Prefers safetensors (no code execution); falls back to pytorch_model.bin read with
  torch.load(weights_only=True), which refuses pickled code.
  """
  directory = pathlib.Path(path)
  if (directory / SAFETENSORS_FILE).is_file():
    return _load_safetensors([directory / SAFETENSORS_FILE]), str(directory / SAFETENSORS_FILE)
  if (directory / SAFETENSORS_INDEX).is_file():
    files = _index_files(directory / SAFETENSORS_INDEX)
    return _load_safetensors(files), str(directory / SAFETENSORS_INDEX)
  if (directory / TORCH_FILE).is_file():
    return _load_torch([directory / TORCH_FILE]), str(directory / TORCH_FILE)
  if (directory / TORCH_INDEX).is_file():
    return _load_torch(_index_files(directory / TORCH_INDEX)), str(directory / TORCH_INDEX)
  raise FileNotFoundError(f"No weights in {directory}: expected {SAFETENSORS_FILE}, "
                          f"{SAFETENSORS_INDEX}, {TORCH_FILE} or {TORCH_INDEX}.")


def _index_files(index_path: pathlib.Path) -> list[pathlib.Path]:
  weight_map = json.loads(index_path.read_text())["weight_map"]
  return [index_path.parent / name for name in sorted(set(weight_map.values()))]


def _as_numpy(array) -> np.ndarray:
  array = np.asarray(array)
  if np.issubdtype(array.dtype, np.floating) and array.dtype != np.float32:
    array = array.astype(np.float32)
  return array


def _load_safetensors(files) -> dict[str, np.ndarray]:
  import safetensors.numpy  # bf16 tensors need the torch path; safetensors.numpy covers f16/f32
  state = {}
  for file in files:
    state.update({k: _as_numpy(v) for k, v in safetensors.numpy.load_file(str(file)).items()})
  return state


def _load_torch(files) -> dict[str, np.ndarray]:
  try:
    import torch
  except ImportError:
    raise ImportError(f"Reading {files[0]} needs torch; install it (pip install torch==2.13.0) "
                      "or convert the checkpoint to safetensors.") from None
  state = {}
  for file in files:
    loaded = torch.load(str(file), map_location="cpu", weights_only=True)
    state.update({k: _as_numpy(v.float().numpy() if v.is_floating_point() else v.numpy())
                  for k, v in loaded.items()})
  return state


def write_model_dir(path: str | os.PathLike, config: Mapping, state: Mapping[str, np.ndarray]) -> None:
  """Writes config.json + model.safetensors; each file appears complete or not at all."""
  import safetensors.numpy
  directory = pathlib.Path(path)
  directory.mkdir(parents=True, exist_ok=True)
  tensors = {k: np.ascontiguousarray(v) for k, v in state.items()}
  _atomic_write(directory / SAFETENSORS_FILE,
                lambda tmp: safetensors.numpy.save_file(tensors, tmp, metadata={"format": "pt"}))
  _atomic_write(directory / CONFIG_FILE,
                lambda tmp: pathlib.Path(tmp).write_text(json.dumps(dict(config), indent=2, sort_keys=True)))


def _atomic_write(target: pathlib.Path, write) -> None:
  fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.")
  os.close(fd)
  try:
    write(tmp)
    os.replace(tmp, target)
  finally:
    if os.path.exists(tmp):
      os.remove(tmp)
