"""Counters for the data rules that drop, split or truncate bad input.

Preprocessors never crash on awkward documents (empty, too short, a sentence
longer than the sequence); they apply a stated rule and count it here. The
counter lives in Python and is bumped through `tf.py_function` only when the
rule fires (inside a `tf.cond`), so clean data pays nothing.

  from bertjax.data.preprocessors import stats
  stats.snapshot()   # {'pairs/skipped_single_sentence_document': 3, ...}
"""
import collections
import threading

from absl import logging
import tensorflow as tf

_LOCK = threading.Lock()
_COUNTS: collections.Counter = collections.Counter()


def _bump(name: str, amount) -> None:
  amount = int(amount)
  with _LOCK:
    _COUNTS[name] += amount
    total = _COUNTS[name]
  logging.log_every_n_seconds(logging.WARNING, "data rule %s applied (total %d)", 30,
                              name, total)


def count(name: str, amount: tf.Tensor) -> tf.Tensor:
  """Adds `amount` (int scalar tensor) to counter `name`; a no-op op when it is 0.

  Returns a dummy tensor; use it as a control dependency so the count runs.
  """
  amount = tf.cast(amount, tf.int64)

  def bump():
    tf.py_function(lambda a: _bump(name, a.numpy()), [amount], [])
    return tf.constant(True)

  return tf.cond(amount > 0, bump, lambda: tf.constant(False))


def snapshot() -> dict:
  """A copy of all counters so far (this process)."""
  with _LOCK:
    return dict(_COUNTS)


def reset() -> None:
  with _LOCK:
    _COUNTS.clear()
