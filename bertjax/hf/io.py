"""Reading and writing Hugging Face model directories (local files only)."""
import contextlib
import json
import os
import pathlib
import tempfile
from typing import Mapping

import numpy as np

from bertjax.files import inside, read_json

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
  config_path = inside(directory, CONFIG_FILE)
  if not config_path.is_file():
    raise FileNotFoundError(f"{config_path} not found: a Hugging Face model directory needs "
                            f"{CONFIG_FILE} next to {SAFETENSORS_FILE} or {TORCH_FILE}.")
  return read_json(config_path, "a Hugging Face model config (an object with 'model_type')")


def load_state_dict(path: str | os.PathLike) -> tuple[dict[str, np.ndarray], str]:
  """All tensors of a model directory as float32/int numpy arrays, and the file(s) they came from.

  Prefers safetensors (no code execution); falls back to pytorch_model.bin read with
  torch.load(weights_only=True), which refuses pickled code.
  """
  directory = pathlib.Path(path)
  for name, load in ((SAFETENSORS_FILE, _load_safetensors), (TORCH_FILE, _load_torch)):
    index = name + ".index.json"  # a sharded checkpoint: the index names the shards
    if inside(directory, name).is_file():
      return load([directory / name]), str(directory / name)
    if inside(directory, index).is_file():
      return load(_index_files(directory / index)), str(directory / index)
  raise FileNotFoundError(f"No weights in {directory}: expected {SAFETENSORS_FILE}, "
                          f"{SAFETENSORS_INDEX}, {TORCH_FILE} or {TORCH_INDEX}.")


def _index_files(index_path: pathlib.Path) -> list[pathlib.Path]:
  weight_map = read_json(index_path, "a shard index ({'weight_map': {tensor: file}})")
  weight_map = weight_map.get("weight_map")
  if not isinstance(weight_map, dict):
    raise ValueError(f"{index_path} has no 'weight_map' object naming each tensor's file.")
  return [inside(index_path.parent, name) for name in sorted(set(map(str, weight_map.values())))]


def _as_numpy(array) -> np.ndarray:
  array = np.asarray(array)
  if np.issubdtype(array.dtype, np.floating) and array.dtype != np.float32:
    array = array.astype(np.float32)
  return array


def _load_safetensors(files) -> dict[str, np.ndarray]:
  import safetensors.numpy  # bf16 tensors need the torch path; safetensors.numpy covers f16/f32
  state = {}
  for file in files:
    with _unreadable(file, "safetensors"):
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
    with _unreadable(file, "PyTorch (.bin)", ", or hold pickled objects other than tensors "
                     "(never loaded: weights_only=True)"):
      loaded = torch.load(str(file), map_location="cpu", weights_only=True)
    state.update({k: _as_numpy(v.float().numpy() if v.is_floating_point() else v.numpy())
                  for k, v in loaded.items()})
  return state


@contextlib.contextmanager
def _unreadable(file, kind: str, more: str = ""):
  """Any failure to parse a weights file as an error naming the file."""
  if not pathlib.Path(file).is_file():
    raise FileNotFoundError(f"{file} not found: the weights it should hold are missing.")
  try:
    yield
  except Exception as e:  # safetensors, pickle and torch raise many types for a bad file
    detail = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
    raise ValueError(f"{file} ({pathlib.Path(file).stat().st_size} bytes) is not a readable "
                     f"{kind} weights file ({detail}): it may be truncated or corrupt{more}. "
                     "Re-download or re-export it.") from e


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
    os.chmod(tmp, 0o666 & ~_umask())  # as open() would create it (mkstemp's is 0600)
    os.replace(tmp, target)
  finally:
    if os.path.exists(tmp):
      os.remove(tmp)


def _umask() -> int:
  mask = os.umask(0)
  os.umask(mask)
  return mask
