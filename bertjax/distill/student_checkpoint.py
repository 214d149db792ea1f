"""A student on disk (the BiLSTM or the small Transformer): a params checkpoint plus its
word vocabulary.

  DIR/params/, DIR/metadata.json   (bertjax.checkpoints.save_params; metadata holds the
                                    family, its config and the vocabulary's size and sha256)
  DIR/words.txt                    (bertjax.data.word_vocabulary, one word per line)

Loading checks that the three agree: params of another size than the config (or than
the config the caller expects), or a vocabulary that is not the one the student was
trained with, fail naming what disagrees.
"""
import dataclasses
import os
from typing import Any

import flax.linen as nn
import jax
import numpy as np
from flax import traverse_util

from bertjax import configurables
from bertjax.checkpoints import METADATA_FILE, load_params, save_params
from bertjax.data.word_vocabulary import WordVocabulary
from bertjax.models.bilstm import BiLSTMClassifier, BiLSTMConfig
from bertjax.models.word_transformer import WordTransformerClassifier, WordTransformerConfig

VOCAB_FILE = "words.txt"
StudentConfig = BiLSTMConfig | WordTransformerConfig


@dataclasses.dataclass(frozen=True)
class Family:
  """A student architecture: its config and module, and where its word embedding is."""
  config: type
  module: type
  embedding: tuple[str, ...]


FAMILIES = {
    "bilstm": Family(BiLSTMConfig, BiLSTMClassifier, ("encoder", "embedding", "embedding")),
    "transformer": Family(WordTransformerConfig, WordTransformerClassifier,
                          ("encoder", "embeddings", "word_embeddings", "embedding")),
}


def family_of(config: StudentConfig) -> str:
  return next(name for name, f in FAMILIES.items() if isinstance(config, f.config))


@dataclasses.dataclass
class Student:
  config: StudentConfig
  params: Any
  vocab: WordVocabulary
  metadata: dict

  @property
  def family(self) -> str:
    return family_of(self.config)

  @property
  def module(self) -> nn.Module:
    return FAMILIES[self.family].module(self.config)


def param_shapes(config: StudentConfig) -> dict[str, tuple[int, ...]]:
  """{'encoder/forward/input_kernel': shape, ...} of a student with `config`."""
  ids = np.zeros((1, 2, 4) if config.pair else (1, 4), np.int32)
  module = FAMILIES[family_of(config)].module(config)
  abstract = jax.eval_shape(lambda: module.init(jax.random.key(0), ids))
  return {k: tuple(v.shape) for k, v in
          traverse_util.flatten_dict(nn.unbox(abstract["params"]), sep="/").items()}


def embedding_params(student: Student) -> int:
  """Parameters in the student's word embedding (most of a BiLSTM student's)."""
  table = student.params
  for key in FAMILIES[student.family].embedding:
    table = table[key]
  return int(np.size(table))


def save_student(directory: str, student: Student) -> None:
  os.makedirs(directory, exist_ok=True)
  student.vocab.save(os.path.join(directory, VOCAB_FILE))
  metadata = {**student.metadata, "family": student.family,
              "config": dataclasses.asdict(student.config),
              "vocabulary": {"size": len(student.vocab),
                             "sha256": student.vocab.fingerprint()}}
  save_params(directory, student.params, metadata)


def load_student(directory: str, expect: StudentConfig | None = None) -> Student:
  """The student in `directory`; with `expect`, its config must equal that one."""
  params, metadata = load_params(directory)
  where = os.path.join(directory, METADATA_FILE)
  if metadata.get("family") not in FAMILIES or "config" not in metadata:
    raise ValueError(f"{where} does not describe a student (family "
                     f"{metadata.get('family')!r}, not one of {sorted(FAMILIES)}); give a folder "
                     "written by `python -m bertjax.distill.student --out=DIR`.")
  config_class = FAMILIES[metadata["family"]].config
  config = config_class(**configurables.upgrade_fields(config_class.__name__, metadata["config"]))
  if expect is not None and type(expect) is not type(config):
    raise ValueError(f"The student in {directory} is a {metadata['family']} student, not a "
                     f"{family_of(expect)} one.")
  if expect is not None and expect != config:
    differ = [f"{f.name}: checkpoint {getattr(config, f.name)!r}, expected "
              f"{getattr(expect, f.name)!r}" for f in dataclasses.fields(config)
              if getattr(config, f.name) != getattr(expect, f.name)]
    raise ValueError(f"The student in {directory} has another size than expected: "
                     f"{'; '.join(differ)}.")
  want = param_shapes(config)
  have = {k: tuple(np.shape(v)) for k, v in traverse_util.flatten_dict(params, sep="/").items()}
  for name in sorted(want.keys() | have.keys()):
    if want.get(name) != have.get(name):
      raise ValueError(f"The student in {directory}: tensor {name!r} has shape {have.get(name)} "
                       f"in params/ but {want.get(name)} by the config in {where} "
                       f"({config}).")
  vocab = WordVocabulary.load(os.path.join(directory, VOCAB_FILE))
  recorded = metadata.get("vocabulary", {})
  if len(vocab) != config.vocab_size or recorded.get("sha256") not in (None,
                                                                        vocab.fingerprint()):
    raise ValueError(f"{vocab.source} is not the vocabulary the student in {directory} was "
                     f"trained with: it has {len(vocab)} words (sha256 {vocab.fingerprint()[:12]})"
                     f", the checkpoint's embedding has {config.vocab_size} rows (vocabulary "
                     f"sha256 {str(recorded.get('sha256'))[:12]}). Put its own {VOCAB_FILE} "
                     "back.")
  return Student(config, params, vocab, metadata)
