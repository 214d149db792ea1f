"""Counters for the data rules that drop, split or truncate bad input.

Preprocessors never crash on awkward documents (empty, too short, a sentence
longer than the sequence); they apply a stated rule and count it here. The
counter lives in Python and is bumped through `tf.py_function` only when the
rule fires (inside a `tf.cond`), so clean data pays nothing. The trainer reports the
counts once per evaluation (`summary`), not as they happen.

  from bertjax.data.preprocessors import stats
  stats.snapshot()   # {'pairs/skipped_single_sentence_document': 3, ...}
"""
import collections
import threading

import tensorflow as tf

_LOCK = threading.Lock()
_COUNTS: collections.Counter = collections.Counter()


def _bump(name: str, amount) -> None:
  amount = int(amount)
  with _LOCK:
    _COUNTS[name] += amount


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


def summary(before: dict | None = None) -> str:
  """'rule N, ...' for every counter that grew since `before` (a `snapshot`); '' if none."""
  before = before or {}
  grown = {name: n - before.get(name, 0) for name, n in sorted(snapshot().items())}
  return ", ".join(f"{name} {n}" for name, n in grown.items() if n)


def reset() -> None:
  with _LOCK:
    _COUNTS.clear()
