"""WordPiece for fine-tuning: ids with character offsets and word alignment.

Fine-tuning needs more than ids: SQuAD maps answer characters to tokens and back, NER
labels the first sub-token of each word. The Rust `tokenizers` library gives both, and
from the very `tokenizer.json` / `vocab.txt` that ships with a checkpoint, so the
pieces match the reference tokenizer exactly. Special tokens are added by our feature
converters (not by the tokenizer), so each converter controls truncation itself.
"""
import os
from typing import Sequence

import tokenizers


class WordPiece:
  """A BERT WordPiece tokenizer with special tokens added by the caller."""

  def __init__(self, tokenizer: tokenizers.Tokenizer):
    tokenizer.no_truncation()
    tokenizer.no_padding()
    self._tok = tokenizer
    self.cls_id = self._special("[CLS]")
    self.sep_id = self._special("[SEP]")
    self.pad_id = self._special("[PAD]")
    self.vocab_size = tokenizer.get_vocab_size()

  @classmethod
  def from_path(cls, path: str, lowercase: bool = True) -> "WordPiece":
    """`path`: a tokenizer.json, a vocab.txt, or a folder holding either.

    `lowercase` applies to a bare vocab.txt (a tokenizer.json carries its own setting).
    """
    if os.path.isdir(path):
      for name in ("tokenizer.json", "vocab.txt"):
        if os.path.exists(os.path.join(path, name)):
          path = os.path.join(path, name)
          break
      else:
        raise FileNotFoundError(f"{path!r} holds neither tokenizer.json nor vocab.txt.")
    if not os.path.exists(path):
      raise FileNotFoundError(f"No tokenizer file at {path!r}.")
    if path.endswith(".json"):
      return cls(tokenizers.Tokenizer.from_file(path))
    wordpiece = tokenizers.implementations.BertWordPieceTokenizer(path, lowercase=lowercase)
    return cls(wordpiece._tokenizer)  # the wrapped Tokenizer, with the BERT normaliser

  def _special(self, token: str) -> int:
    token_id = self._tok.token_to_id(token)
    if token_id is None:
      raise ValueError(f"Vocabulary has no {token} token; is this a BERT WordPiece vocab?")
    return token_id

  def encode(self, text: str) -> list[int]:
    return self._tok.encode(text, add_special_tokens=False).ids

  def encode_batch(self, texts: Sequence[str]) -> list[list[int]]:
    return [e.ids for e in self._tok.encode_batch(list(texts), add_special_tokens=False)]

  def encode_with_offsets(self, text: str) -> tuple[list[int], list[tuple[int, int]]]:
    """Ids and each token's [start, end) character span in `text`."""
    encoding = self._tok.encode(text, add_special_tokens=False)
    return encoding.ids, encoding.offsets

  def encode_words(self, words: Sequence[str]) -> list[list[int]]:
    """The pieces of each pre-split word (a word may yield no piece: e.g. a control char)."""
    encoding = self._tok.encode(list(words), is_pretokenized=True, add_special_tokens=False)
    pieces: list[list[int]] = [[] for _ in words]
    for token_id, word in zip(encoding.ids, encoding.word_ids):
      pieces[word].append(token_id)
    return pieces

  def decode(self, ids: Sequence[int]) -> str:
    return self._tok.decode(list(ids))

