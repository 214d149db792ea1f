"""Packing token ids into encoder inputs as the tokenizer lays them out: special tokens,
token types, truncation and padding.

Every tokenizer family puts its own special tokens around one text or a pair:

  BERT, ALBERT, ELECTRA, DeBERTa, BigBird   [CLS] A [SEP] B [SEP]        types 0..0 1..1
  RoBERTa, Longformer                       <s> A </s></s> B </s>        types all 0
  XLNet                                     A <sep> B <sep> <cls>        types 0..0 1..1 2

A `Layout` holds that template (read off the tokenizer itself:
`bertjax.finetune.tokenization`), the pad token and the padding side (XLNet pads on the
left). Arrays follow the batch-feature contract (`input_ids`, `attention_mask`,
`token_type_ids`, int32 [N, L]).
"""
import dataclasses
from typing import Sequence

import numpy as np

SEGMENTS = ("A", "B")


@dataclasses.dataclass(frozen=True)
class Layout:
  """Where the texts and the special tokens go, as the reference tokenizer builds inputs.

  `single` / `pair`: (token id, or "A" / "B" for a text, token type) per slot.
  """
  single: tuple[tuple[int | str, int], ...]
  pair: tuple[tuple[int | str, int], ...]
  pad_id: int
  pad_type_id: int = 0
  padding_side: str = "right"

  def num_special(self, pair: bool) -> int:
    return sum(token not in SEGMENTS for token, _ in (self.pair if pair else self.single))

  def pack(self, a: Sequence[int], b: Sequence[int] | None = None
           ) -> tuple[list[int], list[int], dict[str, int]]:
    """(ids, token types, the position where each text starts) of a text or a pair."""
    texts = {"A": list(a), "B": None if b is None else list(b)}
    ids, types, starts = [], [], {}
    for token, type_id in (self.single if b is None else self.pair):
      if token in SEGMENTS:
        starts[token] = len(ids)
        ids += texts[token]
        types += [type_id] * len(texts[token])
      else:
        ids.append(token)
        types.append(type_id)
    return ids, types, starts

  def encode(self, a: Sequence[int], b: Sequence[int] | None,
             max_length: int) -> tuple[list[int], list[int]]:
    """pack() after truncating to `max_length` tokens, special tokens included, as the
    reference's `truncation=True` ('longest_first') does."""
    budget = max_length - self.num_special(b is not None)
    if budget < 0:
      raise ValueError(f"max_length={max_length} leaves no room for text next to the "
                       f"{self.num_special(b is not None)} special tokens.")
    if b is None:
      return self.pack(list(a)[:budget])[:2]
    return self.pack(*truncate_longest_first(a, b, budget))[:2]

  def padding(self, num_tokens: int, length: int) -> int:
    """How far padding to `length` moves a row's tokens (left padding moves them right)."""
    if num_tokens > length:
      raise ValueError(f"A row of {num_tokens} tokens does not fit the padded length {length}.")
    return length - num_tokens if self.padding_side == "left" else 0

  def to_arrays(self, ids: Sequence[Sequence[int]], types: Sequence[Sequence[int]],
                length: int) -> dict[str, np.ndarray]:
    """The encoder inputs of packed rows, padded to `length` on the tokenizer's side."""
    arrays = {"input_ids": np.full((len(ids), length), self.pad_id, np.int32),
              "attention_mask": np.zeros((len(ids), length), np.int32),
              "token_type_ids": np.full((len(ids), length), self.pad_type_id, np.int32)}
    for i, (row, row_types) in enumerate(zip(ids, types)):
      start = self.padding(len(row), length)
      window = slice(start, start + len(row))
      arrays["input_ids"][i, window] = row
      arrays["attention_mask"][i, window] = 1
      arrays["token_type_ids"][i, window] = row_types
    return arrays


def truncate_longest_first(a: Sequence[int], b: Sequence[int],
                           budget: int) -> tuple[list[int], list[int]]:
  """Both texts cut to `budget` tokens in all, as `tokenizers`' LongestFirst strategy does
  (the one transformers' truncation=True runs): the longer side loses its tail first; when
  both must be cut, each keeps half and the longer (else the second) the odd token."""
  a, b = list(a), list(b)
  if len(a) + len(b) <= budget:
    return a, b
  short, long = sorted((len(a), len(b)))
  keep_short = short if short <= budget - short else budget // 2
  keep_long = budget - keep_short
  if len(a) > len(b):
    return a[:keep_long], b[:keep_short]
  return a[:keep_short], b[:keep_long]
