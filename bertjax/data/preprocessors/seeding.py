"""Stateless per-example randomness for tf.data preprocessors.

Every random preprocessor here is a pure function `fn(example, seed)` where
`seed` is an int32/int64 tensor of shape [2] consumed by `tf.random.stateless_*`
ops. `map_with_seed` feeds it one fresh seed per example from a seeded stream,
so a pipeline is a deterministic function of (data, seed).
"""
from typing import Callable, Optional

import seqio
import tensorflow as tf


def map_with_seed(dataset: tf.data.Dataset, fn: Callable, seed: Optional[int] = None,
                  **kwargs) -> tf.data.Dataset:
  """Maps `fn(example, seed=[2] tensor, **kwargs)` over `dataset`.

  With `seed=None` the seeds come from seqio's seed manager, i.e. from the
  `seed` given to `Task.get_dataset` (non-deterministic if that is None too).
  With an int, the seed stream starts at that value, independent of seqio.
  """
  mapper = seqio.map_over_dataset(fn, num_seeds=1)
  if seed is None:
    return mapper(dataset, **kwargs)
  with seqio.utils.map_seed_manager(seed):
    return mapper(dataset, **kwargs)


def split_seed(seed: tf.Tensor, num: int) -> list:
  """`num` independent [2] seeds derived from one [2] seed."""
  return tf.unstack(tf.random.experimental.stateless_split(seed, num))


def shuffle(values: tf.Tensor, seed: tf.Tensor) -> tf.Tensor:
  """A uniformly random permutation of a 1-D tensor (stateless)."""
  return seqio.utils.stateless_shuffle(values, seed)
