"""Batches for the trainer: host-local pipelines in, global sharded arrays out.

Every process reads its own shard of the data (`shard_id = process_index`) at the
*host-local* batch size `global_batch // process_count`; `to_global` assembles the
global `jax.Array` with `jax.make_array_from_process_local_data`, so the same loop
runs on a laptop (1 process) and on a pod slice (N processes).

The pipelines are deterministic for a seed, so a resumed run restores its input
position exactly by skipping the batches it already consumed.
"""
import itertools
from typing import Any, Callable, Iterable, Iterator, Mapping, NamedTuple

from absl import logging
import gin
import jax
import numpy as np

Batch = dict[str, np.ndarray]
# (task_name, split, batch_size, sequence_length, seed, shard_id, num_shards) -> batches
DataFn = Callable[..., Any]


@gin.configurable
def task_dataset(task_name: str, split: str, batch_size: int, sequence_length: int, seed: int,
                 shard_id: int, num_shards: int, pack: bool | None = None,
                 vocabulary: Any = None, source: Any = None):
  """Batches of a registered task (`bertjax.data.recipes`), as a tf.data.Dataset.

  `vocabulary` / `source` override the task's defaults (gin: `@corpus_wordpiece()`).
  The train split is shuffled and repeats forever; other splits are read once, in
  order, with a short last batch (the trainer pads it), so evaluation is exact.
  """
  from bertjax.data import recipes  # Local: imports TensorFlow and the task registry.
  train = split == "train"
  return recipes.get_dataset(task_name, split=split, sequence_length=sequence_length,
                           batch_size=batch_size, seed=seed, shard_id=shard_id,
                           num_shards=num_shards, pack=pack, shuffle=train,
                           num_epochs=None if train else 1, drop_remainder=train,
                           vocabulary=vocabulary, source=source)


def task_vocabulary(data_fn: DataFn):
  """The vocabulary `data_fn` tokenizes with when it is `task_dataset` (its gin-bound
  `vocabulary`, else the recipes' default); None for any other data function."""
  if data_fn is not task_dataset:
    return None
  from bertjax.data import recipes  # Local: imports TensorFlow and the task registry.
  return gin.get_bindings(task_dataset).get("vocabulary") or recipes.default_vocabulary()


def save_vocabulary(data_fn: DataFn, task_name: str | None, model_dir: str) -> list[str]:
  """Writes the vocabulary of `task_name` into `model_dir` as Hugging Face tokenizer files
  (`bertjax.data.vocabulary_files`), laid out as the recipe lays out its inputs, so the
  run fine-tunes without naming its vocabulary. Only process 0 writes; nothing is written
  for data functions other than `task_dataset`, and a vocabulary that tokenizer files cannot
  hold is only logged (fine-tuning then asks for --tokenizer). Returns the files' names."""
  vocabulary = task_vocabulary(data_fn) if task_name else None
  if vocabulary is None or jax.process_index() != 0:
    return []
  from bertjax.data import recipes, vocabulary_files  # Local: TensorFlow, as above.
  try:
    return vocabulary_files.save(vocabulary, model_dir, recipes.lookup(task_name).layout)
  except ValueError as e:
    logging.warning("The vocabulary is not saved into %s: %s", model_dir, e)
    return []


class HostShard(NamedTuple):
  """The slice of every global batch this process feeds: rows
  [shard_id * batch_size, (shard_id + 1) * batch_size), one of num_shards."""
  shard_id: int
  num_shards: int
  batch_size: int


def host_shard(global_batch_size: int, sharding: jax.sharding.Sharding) -> HostShard:
  """Which rows of the global batch this process's devices hold under `sharding`.

  Usually process i of N holds shard i of N; when a mesh axis other than the batch's
  spans processes (e.g. `model` across hosts), several processes hold the same rows
  and must read the same shard, which `to_global` then expects from each of them.
  """
  index_map = sharding.addressable_devices_indices_map((global_batch_size,))
  rows = sorted({idx[0].indices(global_batch_size)[:2] for idx in index_map.values()})
  start, stop = rows[0][0], rows[-1][1]
  size = stop - start
  if sum(b - a for a, b in rows) != size or start % size or global_batch_size % size:
    raise ValueError(
        f"This process's devices hold rows {rows} of the global batch of "
        f"{global_batch_size}, not one contiguous shard; order the mesh so each process's "
        f"devices are adjacent along the batch axis (make_mesh.dcn_shape for multi-slice).")
  return HostShard(start // size, global_batch_size // size, size)


class DataError(ValueError):
  """The input pipeline failed on its data (a corrupt or truncated file): one line that
  names the file, from the error the pipeline raised."""


def iterate(dataset: Any, skip: int = 0) -> Iterator[Batch]:
  """Numpy batches of a tf.data.Dataset or any iterable, after skipping `skip` batches.
  An error inside the tf.data pipeline comes out as a DataError carrying its message."""
  if hasattr(dataset, "as_numpy_iterator"):
    if skip:
      dataset = dataset.skip(skip)
    return _reported(dataset.as_numpy_iterator())
  return itertools.islice(iter(dataset), skip, None)


def _reported(batches: Iterator[Batch]) -> Iterator[Batch]:
  import tensorflow as tf  # pylint: disable=g-import-not-at-top  (a tf.data pipeline: loaded)
  while True:
    try:
      batch = next(batches)
    except StopIteration:
      return
    except tf.errors.OpError as e:
      lines = [line.strip() for line in e.message.splitlines() if line.strip()]
      named = [line for line in lines if "Error:" in line] or lines
      raise DataError(f"The input pipeline failed: {named[-1] if named else type(e).__name__}"
                      ) from None
    yield batch


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


def in_step_across_hosts(batches: Iterable[Batch]) -> Iterator[Batch]:
  """Batches until *every* process has run out, for reading a split once (eval).

  Each step is a collective over all processes, so all must take the same number of
  steps although their shards may hold different numbers of batches: a process that
  ran out feeds zero batches (zero masks and weights count for nothing), and all stop
  together. With one process this is just `batches`.
  """
  if jax.process_count() == 1:
    yield from batches
    return
  from jax.experimental import multihost_utils  # Local: multi-process only.
  iterator, template = iter(batches), None
  while True:
    batch = next(iterator, None)
    more = multihost_utils.process_allgather(np.int32(batch is not None))
    if not np.any(more):
      return
    if batch is None:
      if template is None:
        raise ValueError(f"Process {jax.process_index()} got no batch at all from its shard "
                         f"of the split while others did; use fewer processes or more data.")
      batch = {k: np.zeros_like(v) for k, v in template.items()}
    template = batch
    yield batch


def take(iterator: Iterable[Batch], n: int | None) -> Iterator[Batch]:
  """At most n batches (all when n is None)."""
  return iter(iterator) if n is None else itertools.islice(iterator, n)
