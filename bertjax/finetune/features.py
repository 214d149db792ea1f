"""Packing token ids into BERT inputs: [CLS] a [SEP] (b [SEP]), token types, padding.

Shared by every task family. Arrays follow the batch-feature contract of the data
layer (`input_ids`, `attention_mask`, `token_type_ids`, int32 [N, L]).
"""
from typing import Sequence

import numpy as np


def truncate_pair(a: Sequence[int], b: Sequence[int], budget: int) -> tuple[list[int], list[int]]:
  """BERT's `_truncate_seq_pair`: drop the last token of the longer side until a+b fit.

  Trimming the longer side one token at a time keeps as much of the shorter text as
  possible (a short hypothesis is not sacrificed to a long premise).
  """
  a, b = list(a), list(b)
  while len(a) + len(b) > budget:
    if len(a) > len(b):
      a.pop()
    else:
      b.pop()
  return a, b


def pack(a: Sequence[int], b: Sequence[int] | None, cls_id: int,
         sep_id: int) -> tuple[list[int], list[int]]:
  """Ids and token types of `[CLS] a [SEP]` or `[CLS] a [SEP] b [SEP]` (b has type 1)."""
  ids = [cls_id, *a, sep_id]
  types = [0] * len(ids)
  if b is not None:
    ids += [*b, sep_id]
    types += [1] * (len(b) + 1)
  return ids, types


def encode_pair(a: Sequence[int], b: Sequence[int] | None, max_length: int, cls_id: int,
                sep_id: int) -> tuple[list[int], list[int]]:
  """pack() after truncating to `max_length` including the special tokens."""
  if b is None:
    return pack(list(a)[:max_length - 2], None, cls_id, sep_id)
  a, b = truncate_pair(a, b, max_length - 3)
  return pack(a, b, cls_id, sep_id)


def pad_rows(rows: Sequence[Sequence[int]], length: int, value: int = 0) -> np.ndarray:
  """[len(rows), length] int32, each row right-padded with `value`."""
  out = np.full((len(rows), length), value, np.int32)
  for i, row in enumerate(rows):
    if len(row) > length:
      raise ValueError(f"Row {i} has {len(row)} tokens, more than the padded length {length}.")
    out[i, :len(row)] = row
  return out


def to_arrays(ids: Sequence[Sequence[int]], types: Sequence[Sequence[int]], length: int,
              pad_id: int) -> dict[str, np.ndarray]:
  """The encoder inputs for packed rows, padded to `length`."""
  input_ids = pad_rows(ids, length, pad_id)
  attention_mask = pad_rows([[1] * len(r) for r in ids], length, 0)
  return {"input_ids": input_ids, "attention_mask": attention_mask,
          "token_type_ids": pad_rows(types, length, 0)}
