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
"""
from typing import Iterator, Optional

import numpy as np
import tensorflow as tf


def stream_windows(documents: Iterator[np.ndarray], batch_size: int, window: int,
                   stride: int, separator_id: Optional[int] = None) -> Iterator[list]:
  """Yields, per step, the `batch_size` windows (int32 arrays) of the row streams."""
  separator = np.asarray([] if separator_id is None else [separator_id], np.int32)
  buffers = [np.zeros([0], np.int32) for _ in range(batch_size)]
  while True:
    rows = []
    for r in range(batch_size):
      pieces, size = [buffers[r]], len(buffers[r])
      while size < window:
        doc = next(documents, None)
        if doc is None:
          return
        pieces += [np.asarray(doc, np.int32), separator]
        size += len(doc) + len(separator)
      buffer = np.concatenate(pieces) if len(pieces) > 1 else pieces[0]
      rows.append(buffer[:window])
      buffers[r] = buffer[stride:]
    yield rows


def row_streams(dataset: tf.data.Dataset, *, batch_size: int, window: int, stride: int,
                separator_id: Optional[int] = None, key: str = "targets") -> tf.data.Dataset:
  """Documents (`key`: int tokens, one document per example) -> windows of `batch_size`
  continuous row streams, in batch order (module docstring). Other features are dropped."""
  if batch_size < 1 or window < 1 or not 1 <= stride <= window:
    raise ValueError(f"row_streams needs batch_size >= 1 and 1 <= stride <= window; got "
                     f"batch_size={batch_size}, window={window}, stride={stride}.")
  documents = dataset.map(lambda ex: ex[key])

  def generate():
    for rows in stream_windows(documents.as_numpy_iterator(), batch_size, window, stride,
                               separator_id):
      yield from rows

  windows = tf.data.Dataset.from_generator(
      generate, output_signature=tf.TensorSpec([window], tf.int32))
  return windows.map(lambda tokens: {key: tokens})
