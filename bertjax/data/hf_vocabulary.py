"""`vocab_from_hf`: the bertjax vocabulary matching a local Hugging Face tokenizer folder."""
import os
from typing import Optional

import gin
import seqio

from bertjax import paths
from bertjax import files
from bertjax.data.vocabularies import (ROLES, ByteLevelBPEVocabulary, SentencePieceVocabulary,
                                      WordPieceVocabulary)


def _read_json(path: str) -> Optional[dict]:
  return files.read_json(path, "tokenizer settings") if os.path.exists(path) else None


def _components(node: Optional[dict], key: str) -> list:
  """Flattens a tokenizer.json normalizer / pre_tokenizer (maybe a Sequence) to a list."""
  if not node:
    return []
  if node.get("type") == "Sequence":
    return [c for child in node.get(key, []) for c in _components(child, key)]
  return [node]


def _config_roles(config: dict) -> dict:
  roles = {}
  for role in ROLES:
    token = config.get(f"{role}_token")
    token = token.get("content") if isinstance(token, dict) else token
    if token is not None:
      roles[role] = token
  return roles


def vocab_from_hf(path, extra_ids: int = 0) -> seqio.Vocabulary:
  """The vocabulary matching a local Hugging Face tokenizer directory.

  Reads tokenizer.json (model type, normaliser, pre-tokeniser, added tokens) when
  present, else infers from the vocabulary files; tokenizer_config.json names the
  special tokens. WordPiece -> WordPieceVocabulary, Unigram (+ *.model) ->
  SentencePieceVocabulary, byte-level BPE -> ByteLevelBPEVocabulary.
  """
  path = os.fspath(path)
  if not os.path.isdir(path):
    raise FileNotFoundError(f"vocab_from_hf: {path!r} is not a directory.")
  files.check_tokenizer_files(path)  # links out of the folder, binary vocabularies
  file = lambda name: os.path.join(path, name)  # pylint: disable=unnecessary-lambda-assignment
  config = _read_json(file("tokenizer_config.json")) or {}
  spec = _read_json(file("tokenizer.json"))
  tokenizer_json = file("tokenizer.json") if spec else None
  kind = spec["model"]["type"] if spec else None
  roles = _config_roles(config)
  sp_models = sorted(f for f in os.listdir(path) if f.endswith(".model"))
  tokenizer_class = config.get("tokenizer_class", "")

  if kind == "WordPiece" or (kind is None and os.path.exists(file("vocab.txt"))):
    norm = next((n for n in _components(spec and spec.get("normalizer"), "normalizers")
                 if n.get("type") == "BertNormalizer"), None)
    lower = norm["lowercase"] if norm else config.get("do_lower_case", True)
    strip = norm["strip_accents"] if norm else config.get("strip_accents")
    vocab_file = file("vocab.txt") if os.path.exists(file("vocab.txt")) else None
    return WordPieceVocabulary(vocab_file, lower_case=lower, strip_accents=strip,
                               tokenizer_json=tokenizer_json, roles=roles,
                               extra_ids=extra_ids)

  if kind == "Unigram" or (kind is None and sp_models):
    if not sp_models:
      raise ValueError(f"vocab_from_hf: {path!r} has a Unigram tokenizer.json but no "
                       "SentencePiece model (spiece.model); in-graph tokenisation needs it.")
    model = file("spiece.model") if "spiece.model" in sp_models else file(sp_models[0])
    if spec:
      norms = _components(spec.get("normalizer"), "normalizers")
      types = {n["type"] for n in norms}
      pre = {n["type"] for n in _components(spec.get("pre_tokenizer"), "pretokenizers")}
      added = [t["content"] for t in spec["added_tokens"]]
      specials = [t["content"] for t in spec["added_tokens"] if t["special"]]
      return SentencePieceVocabulary(
          model, lower_case="Lowercase" in types, strip_accents="StripAccents" in types,
          normalize_quotes=any(n.get("pattern") == {"String": "``"} for n in norms),
          whitespace_split="WhitespaceSplit" in pre, roles=roles or None,
          added_tokens=added, special_tokens=specials, extra_ids=extra_ids)
    # transformers' defaults: AlbertTokenizer lowercases and strips accents unless told
    # otherwise; XLNetTokenizer strips accents whatever keep_accents says.
    albert, xlnet = (tokenizer_class.startswith(name) for name in ("Albert", "XLNet"))
    return SentencePieceVocabulary(
        model, lower_case=config.get("do_lower_case", albert),
        strip_accents=xlnet or not config.get("keep_accents", not albert),
        normalize_quotes=tokenizer_class.startswith(("Albert", "XLNet")),
        whitespace_split=not tokenizer_class.startswith("BigBird"),
        roles=roles or None, extra_ids=extra_ids)

  vocab_json = next((file(f) for f in ("vocab.json", "encoder.json")
                     if os.path.exists(file(f))), None)
  merges = next((file(f) for f in ("merges.txt", "vocab.bpe") if os.path.exists(file(f))),
                None)
  if kind == "BPE" or (kind is None and vocab_json and merges):
    return ByteLevelBPEVocabulary(vocab_json, merges, special_tokens=roles,
                                  add_prefix_space=config.get("add_prefix_space", False),
                                  tokenizer_json=tokenizer_json, extra_ids=extra_ids)

  raise ValueError(
      f"vocab_from_hf: cannot tell the tokenizer in {path!r} (found {sorted(os.listdir(path))}"
      f"{', model type ' + kind if kind else ''}). Expected tokenizer.json of a WordPiece, "
      "Unigram or BPE model, or vocab.txt (WordPiece), spiece.model (SentencePiece), or "
      "vocab.json + merges.txt (byte-level BPE), with an optional tokenizer_config.json.")


@gin.configurable
def hf_vocabulary(name_or_path: str):
  """A Hugging Face tokenizer folder as the vocabulary: a path, or the name of a folder
  under <data_dir>/tokenizers/hf (e.g. 'roberta-gpt2-ids', RoBERTa's byte-level BPE)."""
  directory = name_or_path
  if not os.path.isdir(directory):
    directory = str(paths.data_dir() / "tokenizers" / "hf" / name_or_path)
  if not os.path.isdir(directory):
    raise FileNotFoundError(
        f"hf_vocabulary: {name_or_path!r} is neither a folder nor a tokenizer under "
        f"{paths.data_dir() / 'tokenizers' / 'hf'}; bind hf_vocabulary.name_or_path to a "
        "Hugging Face tokenizer folder (tokenizer.json or vocab files).")
  return vocab_from_hf(directory)
