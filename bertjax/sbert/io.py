"""Sentence-embedding models on disk: tokenizer and pooling settings beside the encoder.

A sentence model directory holds an encoder `bertjax.open_model` opens (a converted
bertjax checkpoint, a Hugging Face model folder, or a sentence-transformers folder with
its transformer in a subfolder); the pooling settings are the sentence-transformers
files (`modules.json`, `1_Pooling/config.json`, `sentence_bert_config.json`), so a saved
SBERT model is readable by both bertjax and sentence-transformers' conventions.
"""
import dataclasses
import json
import os
import pathlib
from typing import Sequence

import numpy as np

POOLING_DIR = "1_Pooling"
# sentence-transformers' names for our pooling modes.
_ST_POOLING_KEYS = {"mean": "pooling_mode_mean_tokens", "max": "pooling_mode_max_tokens",
                    "cls": "pooling_mode_cls_token"}
# What `python -m bertjax.convert` should carry along for encode to pick these up.
SENTENCE_FILES = ("modules.json", "sentence_bert_config.json", f"{POOLING_DIR}/config.json")


@dataclasses.dataclass(frozen=True)
class SentenceConfig:
  pooling: str = "mean"
  normalize: bool = False
  max_seq_length: int = 512


def read_sentence_config(directory: str | os.PathLike) -> SentenceConfig:
  """Pooling / normalisation / max length from sentence-transformers files, else defaults."""
  root = pathlib.Path(directory)
  pooling, normalize, max_len = "mean", False, None
  pooling_file = root / POOLING_DIR / "config.json"
  if pooling_file.exists():
    settings = json.loads(pooling_file.read_text())
    chosen = [mode for mode, key in _ST_POOLING_KEYS.items() if settings.get(key)]
    if len(chosen) != 1:
      raise ValueError(f"{pooling_file}: expected exactly one of {sorted(_ST_POOLING_KEYS.values())}"
                       f" to be true, got {chosen}; pass --pooling explicitly.")
    pooling = chosen[0]
  modules_file = root / "modules.json"
  modules = json.loads(modules_file.read_text()) if modules_file.exists() else []
  normalize = any(m.get("type", "").endswith("Normalize") for m in modules)
  # Older sentence-transformers folders keep the transformer's files in a subfolder.
  transformer = next((root / m["path"] for m in modules
                      if m.get("type", "").endswith("Transformer") and m.get("path")), root)
  st_config = transformer / "sentence_bert_config.json"
  if not st_config.exists():
    st_config = root / "sentence_bert_config.json"
  if st_config.exists():
    max_len = json.loads(st_config.read_text()).get("max_seq_length")
  if max_len is None:
    tok_config = transformer / "tokenizer_config.json"
    if tok_config.exists():
      model_max = json.loads(tok_config.read_text()).get("model_max_length")
      max_len = model_max if model_max and model_max < 100_000 else None
  return SentenceConfig(pooling, normalize, int(max_len or 512))


def write_sentence_config(directory: str | os.PathLike, config: SentenceConfig,
                          dimension: int) -> None:
  """The sentence-transformers files describing `config` (inverse of read_sentence_config)."""
  root = pathlib.Path(directory)
  (root / POOLING_DIR).mkdir(parents=True, exist_ok=True)
  pooling = {key: mode == config.pooling for mode, key in _ST_POOLING_KEYS.items()}
  pooling.update(word_embedding_dimension=dimension, pooling_mode_mean_sqrt_len_tokens=False)
  (root / POOLING_DIR / "config.json").write_text(json.dumps(pooling, indent=2))
  modules = [{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
             {"idx": 1, "name": "1", "path": POOLING_DIR,
              "type": "sentence_transformers.models.Pooling"}]
  if config.normalize:
    modules.append({"idx": 2, "name": "2", "path": "2_Normalize",
                    "type": "sentence_transformers.models.Normalize"})
  (root / "modules.json").write_text(json.dumps(modules, indent=2))
  (root / "sentence_bert_config.json").write_text(
      json.dumps({"max_seq_length": config.max_seq_length, "do_lower_case": False}, indent=2))


def save_sentence_model(directory: str | os.PathLike, encoder_model, config: SentenceConfig,
                        tokenizer_from: str | os.PathLike, source: str | None = None) -> None:
  """Writes a trained bare encoder (an HFModel with trained params) for `encode`;
  `source` (metadata) says what it was trained from, by default `tokenizer_from`."""
  from bertjax.checkpoints import converted as checkpoint
  checkpoint.save(encoder_model, directory, tokenizer_from=tokenizer_from,
                  source=source or str(tokenizer_from))
  dimension = int(np.shape(encoder_model.params["embeddings"]["word_embeddings"]["embedding"])[-1])
  write_sentence_config(directory, config, dimension)


class Tokenizer:
  """A Hugging Face `tokenizers` tokenizer used for whole batches, without padding."""

  def __init__(self, backend, pad_id: int | None = None):
    self.backend = backend
    self.backend.no_padding()
    if pad_id is None:
      padding_token = "[PAD]" if backend.token_to_id("[PAD]") is not None else "<pad>"
      pad_id = backend.token_to_id(padding_token)
    self.pad_id = int(pad_id or 0)

  def encode(self, sentences: Sequence[str], max_length: int) -> tuple[list[np.ndarray], int]:
    """Ids with special tokens, each at most max_length long; and how many were cut."""
    self.backend.enable_truncation(max_length)
    encodings = self.backend.encode_batch(list(sentences))
    ids = [np.asarray(e.ids, np.int32) for e in encodings]
    return ids, sum(1 for e in encodings if e.overflowing)


def load_tokenizer(directory: str | os.PathLike) -> Tokenizer:
  """The folder's reference tokenizer with its special tokens (`bertjax.data.hf_tokenizer`:
  tokenizer.json, else vocab.txt, a SentencePiece model or vocab.json + merges.txt, as
  their tokenizer class builds them)."""
  from bertjax.data import hf_tokenizer  # Local: only encoding needs it.
  folder = hf_tokenizer.load(directory)
  return Tokenizer(folder.tokenizer, folder.token_id("pad"))
