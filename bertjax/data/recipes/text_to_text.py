"""Text-to-text tasks (T5, Raffel et al. 2020): GLUE and SQuAD as text in, text out.

Every task reads the official files through bertjax.evaluation's readers, writes each
example as T5 does (Appendix D of the paper; t5.data.preprocessors.glue / stsb / squad)
and scores decoded text with bertjax.evaluation's metrics:

  sst2   "sst2 sentence: it 's a charming journey ."             -> "positive"
  mrpc   "mrpc sentence1: ... sentence2: ..."                      -> "equivalent"
  stsb   "stsb sentence1: ... sentence2: ..."                      -> "3.8" (score to 0.2)
  mnli   "mnli hypothesis: ... premise: ..."                       -> "neutral"
  squad  "question: ... context: ..." (punctuation padded, as T5)  -> the first answer

(GLUE features are named as TFDS names them and joined in sorted order, as T5's
`glue` preprocessor does.) A postprocessor turns generated text back into a label:
text that is no label becomes INVALID (-1, T5's convention), which the metrics count
as wrong and report as `invalid_predictions`, never an error. STS-B is scored against
the exact gold score; SQuAD EM / F1 against all gold answers.

Tasks are registered in seqio's TaskRegistry (with postprocess_fn and metric_fns, so a
seqio.Evaluator can score them too) by `get_task(name, vocabulary)`; `text_to_text_dataset` is
the trainer's data_fn for them (`Trainer.data_fn = @text_to_text_dataset`):

  t2t_glue_{cola,sst2,mrpc,qqp,stsb,mnli,qnli,rte,wnli}, t2t_squad_v1
"""
import dataclasses
import functools
import os
import re
import string
from typing import Any, Callable, Mapping, Optional, Sequence

import gin
import numpy as np
import seqio
import tensorflow as tf

from bertjax import paths
from bertjax.data import feature_converters as fc
from bertjax.data.recipes import registry
from bertjax.evaluation import glue, metrics, readers, squad

INVALID = -1
_PREFIX = "t2t_"


@dataclasses.dataclass(frozen=True)
class GlueFormat:
  """How T5 writes one GLUE task: TFDS feature names of the file's text columns (in
  the order of `glue.GlueTask.text_columns`) and the label words, aligned with
  `glue.GlueTask.labels` (None: STS-B's score)."""
  features: tuple[str, ...]
  words: Optional[tuple[str, ...]]


_NLI = ("entailment", "not_entailment")
GLUE_FORMATS = {
    "cola": GlueFormat(("sentence",), ("unacceptable", "acceptable")),
    "sst2": GlueFormat(("sentence",), ("negative", "positive")),
    "mrpc": GlueFormat(("sentence1", "sentence2"), ("not_equivalent", "equivalent")),
    "qqp": GlueFormat(("question1", "question2"), ("not_duplicate", "duplicate")),
    "stsb": GlueFormat(("sentence1", "sentence2"), None),
    "mnli": GlueFormat(("premise", "hypothesis"), ("contradiction", "entailment", "neutral")),
    "qnli": GlueFormat(("question", "sentence"), _NLI),
    "rte": GlueFormat(("sentence1", "sentence2"), _NLI),
    "wnli": GlueFormat(("sentence1", "sentence2"), ("not_entailment", "entailment")),
}


# ---------------------------------------------------------------------- formatting
def format_glue(task: str, texts: Sequence[str], label) -> tuple[str, str]:
  """(inputs, targets) of one GLUE example as T5 writes it; `label` is the class
  index of `glue.TASKS[task].labels` or STS-B's float score."""
  spec = GLUE_FORMATS[task]
  named = sorted(zip(spec.features, texts))  # T5 joins the features sorted by name
  inputs = " ".join([task] + [f"{name}: {text}" for name, text in named])
  return inputs, label_text(task, label)


def label_text(task: str, label) -> str:
  words = GLUE_FORMATS[task].words
  if words is None:  # STS-B: the nearest multiple of 0.2, one decimal (T5's stsb)
    return f"{np.round(np.float32(label) * np.float32(5)) / np.float32(5):.1f}"  # TF float32
  return words[int(label)]


_PUNCT = re.compile("([" + re.escape(string.punctuation) + "])")


def pad_punctuation(text: str) -> str:
  """T5's SQuAD spacing (`_pad_punctuation`): spaces around every ASCII punctuation
  character (RE2's [[:punct:]]), then whitespace runs collapsed to one space."""
  return re.sub(r"\s+", " ", _PUNCT.sub(r" \1 ", text))


def format_squad(question: str, context: str, answers: Sequence[str]) -> tuple[str, str]:
  """T5's squad: "question: <q> context: <c>" -> the first answer, all padded."""
  inputs = re.sub(r"\s+", " ", " ".join(["question:", pad_punctuation(question), "context:",
                                         pad_punctuation(context)]))
  return inputs, pad_punctuation(answers[0]) if answers else ""


# ---------------------------------------------------------------------- postprocessing
def glue_postprocessor(task: str) -> Callable[..., Any]:
  """seqio postprocess_fn: generated text -> class index / float (INVALID if none)."""
  words = GLUE_FORMATS[task].words

  def postprocess(output, example=None, is_target=False):
    if is_target and example is not None and "label" in example:
      label = example["label"]  # the exact gold (STS-B's unrounded score)
      return float(label) if words is None else int(label)
    text = output.decode("utf-8") if isinstance(output, bytes) else str(output)
    text = text.strip()
    if words is None:
      try:
        return float(text)
      except ValueError:
        return float(INVALID)
    return words.index(text) if text in words else INVALID

  return postprocess


def squad_postprocess(output, example=None, is_target=False):
  """Predictions: the text. Targets: every gold answer of the example (T5's `qa`)."""
  if is_target and example is not None and "answers" in example:
    return [a.decode("utf-8") if isinstance(a, bytes) else str(a) for a in example["answers"]]
  return output.decode("utf-8") if isinstance(output, bytes) else str(output)


# ---------------------------------------------------------------------- metrics
def glue_metric_fn(task: str) -> Callable[..., dict]:
  """seqio metric_fn(targets, predictions) with the task's leaderboard metrics.

  INVALID predictions are wrong: they never equal a label (accuracy), F1 counts them
  as the opposite of the gold (T5's f1_score_with_invalid), MCC sees them as a class
  of their own (as T5 / scikit-learn), and STS-B correlates them as -1.
  """
  spec = glue.get_task(task)

  def metric_fn(targets, predictions) -> dict:
    targets, predictions = np.asarray(targets), np.asarray(predictions)
    invalid = predictions == INVALID
    out = {}
    for name in spec.metrics:
      used = np.where(invalid, 1 - targets, predictions) if name == "f1" else predictions
      out[name] = metrics.METRICS[name](used, targets)
    out["invalid_predictions"] = float(invalid.sum())
    return out

  return metric_fn


def squad_metric_fn(targets, predictions) -> dict:
  """Official SQuAD v1.1 EM / F1 (as fractions), maximised over all gold answers."""
  golds = {str(i): list(t) for i, t in enumerate(targets)}
  report = squad.evaluate(golds, {str(i): p for i, p in enumerate(predictions)}, version="1.1")
  return {"exact_match": report["exact"] / 100.0, "f1": report["f1"] / 100.0}


# ---------------------------------------------------------------------- sources
def _dataset(rows: list[dict], fields: Mapping[str, tf.DType]) -> tf.data.Dataset:
  if not rows:
    raise ValueError("No examples to read.")
  columns = {}
  for key, dtype in fields.items():
    values = [r[key] for r in rows]
    columns[key] = (tf.ragged.constant(values, dtype) if isinstance(values[0], list)
                    else tf.constant(values, dtype))
  return tf.data.Dataset.from_tensor_slices(columns)


@functools.lru_cache(maxsize=32)
def glue_rows(task: str, split: str, data_dir: str) -> tuple:
  """Formatted examples of a GLUE split (the file's split name: train, dev, ...)."""
  spec = glue.get_task(task)
  skip_log = readers.SkipLog()
  rows = []
  for i, ex in enumerate(glue.read_examples(spec, split, skip_log, data_dir)):
    texts = [ex.text_a] + ([ex.text_b] if ex.text_b is not None else [])
    inputs, targets = format_glue(task, texts, ex.label)
    rows.append({"inputs": inputs, "targets": targets, "label": float(ex.label), "idx": i})
  return tuple(rows)


@functools.lru_cache(maxsize=4)
def squad_rows(path: str) -> tuple:
  rows = []
  for i, ex in enumerate(squad.read_examples(path, readers.SkipLog())):
    inputs, targets = format_squad(ex.question, ex.context, ex.answer_texts)
    rows.append({"inputs": inputs, "targets": targets, "idx": i,
                 "answers": [pad_punctuation(a) for a in ex.answer_texts] or [""]})
  return tuple(rows)


def _glue_splits(task: str) -> dict[str, str]:
  """seqio split -> file split: train, validation (+ validation_mismatched for MNLI)."""
  evals = glue.get_task(task).eval_splits
  splits = {"train": "train", "validation": evals[0]}
  if len(evals) > 1:
    splits["validation_mismatched"] = evals[1]
  return splits


@gin.configurable
def data_directory(directory: Optional[str] = None) -> str:
  """Where the task files are: `directory`, else bertjax.paths.data_dir()."""
  return os.fspath(directory or paths.data_dir())


def make_source(name: str, data_dir: Optional[str] = None) -> seqio.DataSource:
  """The seqio source of text-to-text task `name` over the files under `data_dir`."""
  spec = TASKS[name]
  data_dir = data_directory(data_dir)

  def dataset_fn(split, shuffle_files=False, seed=None):
    del shuffle_files, seed  # Single in-memory "file"; seqio shuffles examples.
    if split not in spec.splits:
      raise ValueError(f"Task {name!r} has splits {sorted(spec.splits)}, not {split!r}.")
    return _dataset(list(spec.read(spec.splits[split], data_dir)), spec.fields)

  return seqio.FunctionDataSource(dataset_fn, splits=list(spec.splits))


# ---------------------------------------------------------------------- tasks
@dataclasses.dataclass(frozen=True)
class TextToTextTask:
  name: str
  read: Callable[[str, str], Sequence[dict]]  # (file split, data_dir) -> formatted rows
  splits: Mapping[str, str]                   # seqio split -> file split
  fields: Mapping[str, tf.DType]
  postprocess_fn: Callable[..., Any]
  metric_fns: tuple
  max_target_length: int  # tokens; long enough for every label / most answers


_GLUE_FIELDS = {"inputs": tf.string, "targets": tf.string, "label": tf.float32,
                "idx": tf.int32}


def _squad_read(split: str, data_dir: str) -> tuple:
  return squad_rows(os.path.join(data_dir, "squad", f"{split}-v1.1.json"))


TASKS = {t.name: t for t in [
    TextToTextTask(f"{_PREFIX}glue_{task}", functools.partial(glue_rows, task),
                   _glue_splits(task), _GLUE_FIELDS, glue_postprocessor(task),
                   (glue_metric_fn(task),), max_target_length=8)
    for task in GLUE_FORMATS] + [
    TextToTextTask(f"{_PREFIX}squad_v1", _squad_read, {"train": "train", "validation": "dev"},
                   {"inputs": tf.string, "targets": tf.string, "idx": tf.int32,
                    "answers": tf.string}, squad_postprocess, (squad_metric_fn,),
                   max_target_length=32)]}


def append_eos_after_trim(dataset: tf.data.Dataset, sequence_length: Mapping[str, int],
                          eos_id: int) -> tf.data.Dataset:
  """Cuts inputs / targets to leave room for EOS, then appends it (seqio's rule)."""
  def fn(ex):
    ex = dict(ex)
    for key in ("inputs", "targets"):
      ex[key] = tf.concat([ex[key][:sequence_length[key] - 1], [eos_id]], 0)
    return ex
  return dataset.map(fn, num_parallel_calls=tf.data.AUTOTUNE)


def lengths(name: str, sequence_length) -> dict[str, int]:
  """{'inputs', 'targets'} for an int `sequence_length` (the inputs' length); packed
  training rows hold several examples' targets, so targets get at least a quarter."""
  if isinstance(sequence_length, Mapping):
    return dict(sequence_length)
  return {"inputs": sequence_length,
          "targets": max(TASKS[name].max_target_length, sequence_length // 4)}


def get_task(name: str, vocabulary: seqio.Vocabulary,
             source: Optional[seqio.DataSource] = None) -> seqio.Task:
  """Builds text-to-text task `name` with `vocabulary` and (re)registers it in
  seqio.TaskRegistry (with its postprocess_fn and metric_fns)."""
  if name not in TASKS:
    raise ValueError(f"Unknown text-to-text task {name!r}; known: {sorted(TASKS)}.")
  spec = TASKS[name]
  eos_id = vocabulary.eos_id
  if eos_id is None:
    raise ValueError(f"Vocabulary {type(vocabulary).__name__} has no EOS id.")
  task = seqio.Task(
      name, source=source or make_source(name),
      preprocessors=[seqio.preprocessors.tokenize,
                     functools.partial(append_eos_after_trim, eos_id=eos_id)],
      output_features={k: seqio.Feature(vocabulary, add_eos=False)
                       for k in ("inputs", "targets")},
      postprocess_fn=spec.postprocess_fn, metric_fns=list(spec.metric_fns))
  if name in seqio.TaskRegistry.names():
    seqio.TaskRegistry.remove(name)
  seqio.TaskRegistry.add_provider(name, task)
  return task


@gin.configurable
def text_to_text_dataset(task_name: str, split: str, batch_size: int, sequence_length: int,
                         seed: int, shard_id: int, num_shards: int, vocabulary: Any = None,
                 pack: bool = True, max_train_examples: Optional[int] = None):
  """The trainer's data_fn (see bertjax.train.inputs.task_dataset) for text-to-text
  tasks: batches of EncDecFeatureConverter features. The train split is shuffled,
  packed (several short examples per row) and repeats; other splits are read once,
  unpacked, in order. `max_train_examples` trains on the first N examples only (a
  stated subset)."""
  vocabulary = vocabulary or registry.default_vocabulary()
  task = get_task(task_name, vocabulary)
  train = split == "train"
  ds = task.get_dataset(lengths(task_name, sequence_length), split=split, use_cached=False,
                        shuffle=False, seed=seed, num_epochs=1, trim_output_features=False)
  if train and max_train_examples:
    # Kept in memory: a small subset would otherwise be re-read and re-tokenised from the
    # whole file on every pass that fills the shuffle buffer.
    ds = ds.take(max_train_examples).cache()
  if num_shards > 1:  # an in-memory source: each host keeps every num_shards-th example
    ds = ds.shard(num_shards, shard_id)
  if train:
    ds = ds.repeat().shuffle(10_000, seed=seed)
  converter = fc.EncDecFeatureConverter(pack=pack and train, pad_id=vocabulary.pad_id or 0,
                                        decoder_start_token_id=vocabulary.pad_id or 0)
  ds = converter(ds, converter.task_lengths(lengths(task_name, sequence_length)))
  return ds.batch(batch_size, drop_remainder=train).prefetch(tf.data.AUTOTUNE)
