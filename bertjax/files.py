"""The files of a model folder, read as untrusted input.

A model folder comes from elsewhere: a symbolic link in it may lead anywhere
(`vocab.txt -> /etc/passwd`), a download may stop half-way, a "text" file may be binary.
Readers of model folders (from_hf, open_model, convert, encode, fine-tuning, vocabularies)
take their files through here, so each of these fails with an error naming the file:

- `inside(folder, name)`: folder/name, refused when a link on the way leads out of the
  folder (a link to another file of the same folder is followed);
- `read_json(path)`: a JSON object (or list), or an error saying what the file holds;
- `check_tokenizer_files(path)`: a tokenizer folder's (or file's) files are inside it and
  are UTF-8 text / JSON where they should be.
"""
import json
import os
import pathlib

# Tokenizer files, and sentence-transformers' pooling/normalisation settings: what a
# converted checkpoint carries beside its weights.
TOKENIZER_FILES = ("vocab.txt", "tokenizer.json", "tokenizer_config.json",
                   "special_tokens_map.json", "vocab.json", "merges.txt", "spiece.model",
                   "sentencepiece.bpe.model", "spm.model", "added_tokens.json", "modules.json",
                   "sentence_bert_config.json", "config_sentence_transformers.json",
                   "1_Pooling/config.json", "2_Normalize")
# sentence-transformers' own files: a sentence model's pooling and normalisation, which only
# a bare encoder's folder carries (not a task class's: it does not embed sentences).
SENTENCE_MODEL_FILES = ("modules.json", "sentence_bert_config.json",
                        "config_sentence_transformers.json", "1_Pooling/config.json",
                        "2_Normalize")
_TEXT_FILES = ("vocab.txt", "merges.txt")  # besides every *.json


def embeds_sentences(architecture: str | None) -> bool:
  """Whether a folder of `architecture` may be a sentence model: a bare encoder
  (BertModel, ...; None when unknown), not a task or language-model class."""
  return architecture is None or (architecture.endswith("Model") and "For" not in architecture
                                  and "LMHead" not in architecture)


def inside(folder: str | os.PathLike, name: str | os.PathLike) -> pathlib.Path:
  """folder/name, after checking that it resolves to a place inside `folder`."""
  path = pathlib.Path(folder) / name
  root = os.path.realpath(folder)
  real = os.path.realpath(path)
  if os.path.commonpath([root, real]) == root:
    return path
  link = _first_link(pathlib.Path(folder), pathlib.Path(name))
  shown = f"{link} is a symbolic link to {os.readlink(link)}" if link else f"{path} resolves"
  raise ValueError(
      f"{shown}, which leads out of the model folder {folder} (to {real}); bertjax reads only "
      "files inside a model folder. Copy the file into the folder instead of linking it "
      "(`cp -rL` copies a folder with its links resolved, e.g. a Hugging Face cache snapshot).")


def _first_link(folder: pathlib.Path, name: pathlib.Path) -> pathlib.Path | None:
  path = folder
  for part in name.parts:
    path = path / part
    if path.is_symlink():
      return path
  return None


def read_json(path: str | os.PathLike, what: str = "a JSON object", expected: type = dict):
  """The JSON value in `path`, of type `expected`; a clear error when the file is not
  UTF-8 JSON holding one."""
  try:
    with open(path, encoding="utf-8") as f:
      value = json.load(f)
  except UnicodeDecodeError as e:
    raise ValueError(f"{path} is not UTF-8 text (byte {e.start}: {e.reason}); it should hold "
                     f"{what}. Is it a binary file, or a download cut short?") from None
  except json.JSONDecodeError as e:
    raise ValueError(f"{path} is not valid JSON ({e}); it should hold {what}.") from None
  if not isinstance(value, expected):
    raise ValueError(f"{path} holds a JSON {type(value).__name__}; expected {what}.")
  return value


def check_text(path: str | os.PathLike) -> None:
  """Refuses a text file that is not UTF-8 or holds NUL bytes (a binary file)."""
  data = pathlib.Path(path).read_bytes()
  problem, nul = None, data.find(b"\0")
  if nul >= 0:
    problem = f"a NUL byte at byte {nul}"
  else:
    try:
      data.decode("utf-8")
    except UnicodeDecodeError as e:
      problem = f"invalid UTF-8 at byte {e.start} ({e.reason})"
  if problem:
    raise ValueError(f"{path} is not a text file: {problem}. A vocabulary / tokenizer file "
                     "must be UTF-8 text; replace it with the model's own file.")


def check_tokenizer_files(path: str | os.PathLike) -> None:
  """The tokenizer files in folder `path` (or the one file `path`): inside the folder, and
  text / JSON where they should be."""
  path = pathlib.Path(path)
  if path.is_dir():
    names = [name for name in TOKENIZER_FILES if os.path.lexists(path / name)]
    files = [inside(path, name) for name in names]
  else:
    files = [path] if path.exists() else []
  for folder in [f for f in files if f.is_dir()]:  # e.g. 2_Normalize/: every entry under it
    for parent, dirs, names in os.walk(folder):
      for name in dirs + names:
        inside(path, os.path.relpath(os.path.join(parent, name), path))
  for file in files:
    if file.is_file() and file.suffix == ".json":
      read_json(file, "tokenizer / sentence-transformers settings",
                list if file.name == "modules.json" else dict)
    elif file.is_file() and file.name in _TEXT_FILES:
      check_text(file)
