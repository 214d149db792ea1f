"""Per-row document streams for segment recurrence (Transformer-XL, XLNet).

A model that carries memory from one training step to the next (XLNet's segment
recurrence) only gains from it when row r of batch t+1 continues the text of row r
of batch t. `row_streams` lays documents out as `batch_size` continuous token
streams and emits, step after step, the next window of each:

  step t, row r:  stream_r[t * stride : t * stride + window]

so the window of step t+1 starts `stride` tokens after that of step t (XLNet:
stride = reuse_len, the leading part of a segment whose hidden states become the
next segment's memory, so memory and the next segment are adjacent text).

Layout. XLNet's data_utils (`batchify`) reshapes one input file's token stream to
[batch, -1], which needs the whole file in memory and breaks every row at each
file. Here each row pulls the next whole document (followed by `separator_id`, as
XLNet appends <eod>) whenever its buffer holds less than a window, so a row is
continuous for the whole run, across epochs of a repeated input too, memory is
bounded by one window plus one document per row, and the input is read once, in
order. Every document lives in exactly one row; rows are filled in order 0..B-1 at
each step, so the layout is a deterministic function of the document order.

Multi-host: each host passes its own shard of the documents and its host-local
batch size; its rows are its streams (the trainer places host h's rows, and the
memory carried for them, on host h's devices).

Output: one example `{key: int32[window]}` per (step, row), in batch order
(step-major): batching the result by `batch_size` WITHOUT shuffling gives batch t
= step t. A finite input ends at the first step some row cannot fill; the
partial step is dropped.

Text from elsewhere (`other_key`, XLNet's random segment B): each example also gets
`window` tokens of text that no row holds yet, the documents next in line (step t's
B * window tokens ahead, split by row), so from documents outside every current window.
They are read ahead, not taken: the rows read them later as usual, and the layout is the
same as without them. The input then ends one step earlier, when the text ahead runs out.
"""
import collections
from typing import Iterator, Optional

import numpy as np
import tensorflow as tf


class _Documents:
  """The documents in order, each followed by the separator, readable ahead."""

  def __init__(self, documents: Iterator[np.ndarray], separator: np.ndarray):
    self._documents, self._separator = documents, separator
    self._ahead, self._ahead_size = collections.deque(), 0

  def _read(self) -> Optional[np.ndarray]:
    doc = next(self._documents, None)
    return None if doc is None else np.concatenate([np.asarray(doc, np.int32), self._separator])

  def take(self) -> Optional[np.ndarray]:
    """The next document (None when the input is exhausted)."""
    if self._ahead:
      self._ahead_size -= len(self._ahead[0])
      return self._ahead.popleft()
    return self._read()

  def peek(self, size: int) -> Optional[np.ndarray]:
    """The next `size` tokens, left for `take`; None if the input ends before them."""
    while self._ahead_size < size:
      doc = self._read()
      if doc is None:
        return None
      self._ahead.append(doc)
      self._ahead_size += len(doc)
    return np.concatenate(self._ahead)[:size]


def stream_windows(documents: Iterator[np.ndarray], batch_size: int, window: int,
                   stride: int, separator_id: Optional[int] = None,
                   other_text: bool = False) -> Iterator[list]:
  """Yields, per step, the `batch_size` windows (int32 arrays) of the row streams; with
  `other_text`, (windows, others): others[r], `window` tokens of the text ahead."""
  separator = np.asarray([] if separator_id is None else [separator_id], np.int32)
  reader = _Documents(documents, separator)
  buffers = [np.zeros([0], np.int32) for _ in range(batch_size)]
  while True:
    rows = []
    for r in range(batch_size):
      pieces, size = [buffers[r]], len(buffers[r])
      while size < window:
        doc = reader.take()
        if doc is None:
          return
        pieces.append(doc)
        size += len(doc)
      buffer = np.concatenate(pieces) if len(pieces) > 1 else pieces[0]
      rows.append(buffer[:window])
      buffers[r] = buffer[stride:]
    if not other_text:
      yield rows
      continue
    ahead = reader.peek(batch_size * window)
    if ahead is None:
      return
    yield rows, list(ahead.reshape(batch_size, window))


def row_streams(dataset: tf.data.Dataset, *, batch_size: int, window: int, stride: int,
                separator_id: Optional[int] = None, key: str = "targets",
                other_key: Optional[str] = None) -> tf.data.Dataset:
  """Documents (`key`: int tokens, one document per example) -> windows of `batch_size`
  continuous row streams, in batch order (module docstring). Other features are dropped;
  with `other_key`, each example also holds the text ahead under that name."""
  if batch_size < 1 or window < 1 or not 1 <= stride <= window:
    raise ValueError(f"row_streams needs batch_size >= 1 and 1 <= stride <= window; got "
                     f"batch_size={batch_size}, window={window}, stride={stride}.")
  documents = dataset.map(lambda ex: ex[key])
  spec = tf.TensorSpec([window], tf.int32)

  def generate():
    steps = stream_windows(documents.as_numpy_iterator(), batch_size, window, stride,
                           separator_id, other_text=other_key is not None)
    for step in steps:
      yield from (step if other_key is None else zip(*step))

  if other_key is None:
    windows = tf.data.Dataset.from_generator(generate, output_signature=spec)
    return windows.map(lambda tokens: {key: tokens})
  windows = tf.data.Dataset.from_generator(generate, output_signature=(spec, spec))
  return windows.map(lambda tokens, other: {key: tokens, other_key: other})
