"""Batches for the trainer: host-local pipelines in, global sharded arrays out.

Every process reads its own shard of the data (`shard_id = process_index`) at the
*host-local* batch size `global_batch // process_count`; `to_global` assembles the
global `jax.Array` with `jax.make_array_from_process_local_data`, so the same loop
runs on a laptop (1 process) and on a pod slice (N processes).

The pipelines are deterministic for a seed, so a resumed run restores its input
position exactly by skipping the batches it already consumed.
"""
import itertools
from typing import Any, Callable, Iterable, Iterator, Mapping

import gin
import jax
import numpy as np

Batch = dict[str, np.ndarray]
# (task_name, split, batch_size, sequence_length, seed, shard_id, num_shards) -> batches
DataFn = Callable[..., Any]


@gin.configurable
def task_dataset(task_name: str, split: str, batch_size: int, sequence_length: int, seed: int,
                 shard_id: int, num_shards: int, pack: bool = False,
                 shuffle: bool | None = None, repeat: bool | None = None):
  """Batches of a registered task (bertjax.data.tasks), as a tf.data.Dataset."""
  from bertjax.data import tasks  # Local: imports TensorFlow and the task registry.
  kwargs = {}
  if shuffle is not None:
    kwargs["shuffle"] = shuffle
  if repeat is not None:
    kwargs["repeat"] = repeat
  return tasks.get_dataset(task_name, split=split, sequence_length=sequence_length,
                           batch_size=batch_size, seed=seed, shard_id=shard_id,
                           num_shards=num_shards, pack=pack, **kwargs)


def host_batch_size(global_batch_size: int) -> int:
  if global_batch_size % jax.process_count():
    raise ValueError(f"batch_size={global_batch_size} is not divisible by the "
                     f"{jax.process_count()} processes of this job.")
  return global_batch_size // jax.process_count()


def iterate(dataset: Any, skip: int = 0) -> Iterator[Batch]:
  """Numpy batches of a tf.data.Dataset or any iterable, after skipping `skip` batches."""
  if hasattr(dataset, "as_numpy_iterator"):
    if skip:
      dataset = dataset.skip(skip)
    return iter(dataset.as_numpy_iterator())
  return itertools.islice(iter(dataset), skip, None)


def to_global(batch: Mapping[str, np.ndarray], sharding: jax.sharding.Sharding) -> dict:
  """Host-local numpy batch -> global jax.Arrays split over the mesh's batch axis."""
  return {k: jax.make_array_from_process_local_data(sharding, np.asarray(v))
          for k, v in batch.items()}


def pad_batch(batch: Mapping[str, np.ndarray], batch_size: int) -> Batch:
  """Zero-pads the last, short eval batch: zero masks / weights mean no contribution."""
  out = {}
  for k, v in batch.items():
    v = np.asarray(v)
    if v.shape[0] > batch_size:
      raise ValueError(f"Feature {k!r} has batch dimension {v.shape[0]} > {batch_size}.")
    pad = [(0, batch_size - v.shape[0])] + [(0, 0)] * (v.ndim - 1)
    out[k] = np.pad(v, pad)
  return out


def take(iterator: Iterable[Batch], n: int | None) -> Iterator[Batch]:
  """At most n batches (all when n is None)."""
  return iter(iterator) if n is None else itertools.islice(iterator, n)
