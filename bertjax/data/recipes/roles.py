"""The ids a recipe needs from a vocabulary, by role ([CLS], [SEP], [MASK], ...)."""
import numpy as np

from bertjax.data.preprocessors import masking


def special_ids(vocab) -> dict:
  """Role ids (cls, sep, mask, pad), all special ids and the size of `vocab`."""
  roles = {r: getattr(vocab, f"{r}_id", None) for r in ("cls", "sep", "mask", "pad")}
  missing = [r for r, i in roles.items() if i is None]
  if missing:
    raise ValueError(f"Vocabulary {type(vocab).__name__} has no id for {missing}; encoder "
                     "objectives need [CLS]/[SEP]/[MASK]/[PAD] roles (use "
                     "bertjax.data.vocabularies or hf_vocabulary.vocab_from_hf).")
  specials = set(getattr(vocab, "special_ids", ())) | set(roles.values())
  return dict(roles, special=sorted(specials), vocab_size=vocab.vocab_size)


def word_continuations(vocab) -> np.ndarray:
  """The "is continuation" table of `vocab` for whole-word / span masking."""
  from bertjax.data import vocabularies  # pylint: disable=g-import-not-at-top
  if isinstance(vocab, vocabularies.WordPieceVocabulary):
    style = masking.WORDPIECE
  elif isinstance(vocab, vocabularies.ByteLevelBPEVocabulary):
    style = masking.BYTELEVEL
  else:
    style = masking.SENTENCEPIECE
  pieces = [vocab.id_to_token(i) or "" for i in range(vocab.vocab_size)]
  names = [vocab.id_to_token(i) for i in special_ids(vocab)["special"]]
  return masking.continuation_table(pieces, style, [n for n in names if n])


def role(vocab, *roles: str) -> int:
  """The id of the first role `vocab` has, e.g. _role(v, 'eos', 'sep')."""
  for role in roles:
    found = getattr(vocab, f"{role}_id", None)
    if found is not None:
      return found
  raise ValueError(f"Vocabulary {type(vocab).__name__} has no id for any of {roles}; use "
                   "bertjax.data.vocabularies or hf_vocabulary.vocab_from_hf.")
