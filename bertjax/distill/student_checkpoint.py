"""The BiLSTM student on disk: a params checkpoint plus its word vocabulary.

  DIR/params/, DIR/metadata.json   (bertjax.checkpoints.save_params; metadata holds the
                                    BiLSTMConfig and the vocabulary's size and sha256)
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

from bertjax.checkpoints import METADATA_FILE, load_params, save_params
from bertjax.data.word_vocabulary import WordVocabulary
from bertjax.models.bilstm import BiLSTMClassifier, BiLSTMConfig

VOCAB_FILE = "words.txt"
FAMILY = "bilstm"


@dataclasses.dataclass
class Student:
  config: BiLSTMConfig
  params: Any
  vocab: WordVocabulary
  metadata: dict

  @property
  def module(self) -> BiLSTMClassifier:
    return BiLSTMClassifier(self.config)


def param_shapes(config: BiLSTMConfig) -> dict[str, tuple[int, ...]]:
  """{'encoder/forward/input_kernel': shape, ...} of a student with `config`."""
  ids = np.zeros((1, 2, 4) if config.pair else (1, 4), np.int32)
  abstract = jax.eval_shape(lambda: BiLSTMClassifier(config).init(jax.random.key(0), ids))
  return {k: tuple(v.shape) for k, v in
          traverse_util.flatten_dict(nn.unbox(abstract["params"]), sep="/").items()}


def embedding_params(params) -> int:
  """Parameters in the student's word embedding (most of a BiLSTM student's)."""
  return int(np.size(params["encoder"]["embedding"]["embedding"]))


def save_student(directory: str, student: Student) -> None:
  os.makedirs(directory, exist_ok=True)
  student.vocab.save(os.path.join(directory, VOCAB_FILE))
  metadata = {**student.metadata, "family": FAMILY, "config": dataclasses.asdict(student.config),
              "vocabulary": {"size": len(student.vocab),
                             "sha256": student.vocab.fingerprint()}}
  save_params(directory, student.params, metadata)


def load_student(directory: str, expect: BiLSTMConfig | None = None) -> Student:
  """The student in `directory`; with `expect`, its config must equal that one."""
  params, metadata = load_params(directory)
  where = os.path.join(directory, METADATA_FILE)
  if metadata.get("family") != FAMILY or "config" not in metadata:
    raise ValueError(f"{where} does not describe a BiLSTM student (family "
                     f"{metadata.get('family')!r}); give a folder written by "
                     "`python -m bertjax.distill.student --out=DIR`.")
  config = BiLSTMConfig(**metadata["config"])
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
                       f"(hidden_size={config.hidden_size}, embedding_size="
                       f"{config.embedding_size}, vocab_size={config.vocab_size}).")
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
