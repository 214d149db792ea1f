"""Fine-tuning on your own files, from Python.

  report = bertjax.fine_tune("CKPT", "classification", "train.csv", "dev.csv",
                             text="review", label="sentiment", output_dir="OUT")
  bertjax.pipeline("text-classification", "OUT")("a gripping film")

Four kinds of rows, each run as `finetune.run` runs the corresponding benchmark (the same
featurizer, head, training loop, selection of the best epoch on dev and outputs: OUT is
the fine-tuned transformers class, with results.json, metrics.jsonl, loss_curve.png and
the dev predictions in OUT/predictions/):

  classification        a text (or a pair: `text_pair=COLUMN`) and a label (any strings:
                        the model's labels by name) per row of a .csv, .tsv (both with a
                        header naming the columns) or .jsonl file; GLUE's run
                        (`pipelines.fit_pairs`), selected on accuracy; predictions/dev.tsv
  regression            the same with a score; selected on Pearson's r
  token_classification  tokens and their entity tags (`own_files`); CoNLL-2003's run
                        (`pipelines.fit_tags`), selected on entity F1; predictions/dev.txt
  question_answering    a question, a context and its answer (`own_files`); SQuAD's run
                        (`pipelines.fit_spans`; 2.0's once a question has no answer),
                        selected on F1; predictions/predictions.json

Settings are FinetuneConfig's and Options' fields (learning_rate=..., num_epochs=...,
max_seq_length=..., doc_stride=...).
"""
import dataclasses
import os
import time
from typing import Sequence

import numpy as np

from bertjax.evaluation import glue as glue_eval, readers
from bertjax.finetune import fitting, loop, own_files, pipelines, resume, run, submission

METRICS = {"classification": ("accuracy",), "regression": ("pearson", "spearman")}


def read_examples(path: str, kind: str, text: str, text_pair: str | None, label: str,
                  skips: readers.SkipLog, labels: tuple[str, ...] | None = None,
                  limit: int | None = None) -> tuple[list[glue_eval.PairExample], list[str]]:
  """The file's examples with their raw labels; rows without a text, with a score that is
  not a number, or (given `labels`) with another label go to `skips`."""
  examples, raw = [], []
  for number, row in readers.read_records(path, skips):
    missing = [c for c in (text, label, text_pair) if c and row.get(c) in (None, "")]
    if missing:
      skips.skip(path, number, f"no {', '.join(map(repr, missing))} (its fields: "
                 f"{', '.join(map(str, row))})")
      continue
    value = str(row[label]).strip()
    if kind == "regression":
      try:
        target = float(value)
      except ValueError:
        skips.skip(path, number, f"score {value!r} is not a number")
        continue
    elif labels is not None and value not in labels:
      skips.skip(path, number, f"label {value!r} is not one of the labels {labels}")
      continue
    else:
      target = labels.index(value) if labels is not None else 0
    examples.append(glue_eval.PairExample(str(row[text]), None if text_pair is None
                                          else str(row[text_pair]), target,
                                          f"{path}:{number}", str(len(examples))))
    raw.append(value)
    if limit and len(examples) >= limit:
      break
  readers.require_rows(path, len(examples), skips,
                       f"rows with {text!r}{f', {text_pair!r}' if text_pair else ''} and {label!r}")
  return examples, raw


def fine_tune(model: str, kind: str, train: str, dev: str, *, text: str | None = None,
              text_pair: str | None = None, label: str | None = None,
              labels: Sequence[str] | None = None, output_dir: str | None = None,
              tokenizer: str | None = None, overwrite: bool = False, **settings) -> dict:
  """Fine-tunes `model` (any folder bertjax.open_model reads) on `train`, selecting the
  best epoch on `dev`; returns the report `finetune.run` writes (results.json).

  kind: one of KINDS; text / text_pair / label: the files' column (or JSON field) names,
  FIELDS[kind] by default (token_classification: the tokens and the tags;
  question_answering: the question, the context and the answers); labels: the classes (or
  tags) in the head's order, default those of the training file, sorted ('O' first);
  settings: FinetuneConfig fields (learning_rate, batch_size, num_epochs, ...) and Options
  fields (max_seq_length, max_train_examples, doc_stride, ...). An existing output_dir is
  refused unless `overwrite`, as finetune.run refuses it."""
  start = time.time()
  if kind not in KINDS:
    raise ValueError(f"kind={kind!r}: use one of {KINDS}.")
  if labels is not None and kind in ("regression", "question_answering"):
    raise ValueError(f"labels={labels!r}: a {kind} model has no labels to name.")
  if labels is not None and (len(set(labels)) != len(labels) or len(labels) < 2):
    raise ValueError(f"labels={list(labels)}: give two labels or more, each once.")
  if text_pair is not None and kind == "token_classification":
    raise ValueError(f"text_pair={text_pair!r}: tagging reads one sentence's tokens a row.")
  defaults = dict(zip(("text", "text_pair", "label"), FIELDS[kind]))
  fields = {"text": text or defaults["text"], "text_pair": text_pair or defaults.get("text_pair"),
            "label": label or defaults["label"]}
  options = _options(output_dir, settings)
  skips = readers.SkipLog()
  data = READERS[kind](train, dev, kind, fields, labels and tuple(labels), options, skips)
  opened, encoder, tokens = run.open_for_finetuning(model, tokenizer, options)
  if options.output_dir:
    resume.claim(options.output_dir, "output_dir", overwrite,
                 reads=[model, tokenizer, train, dev])  # resumes a stopped fine_tune
    os.makedirs(options.output_dir, exist_ok=True)
  report = FITS[kind](data, opened, tokens, options)
  report["skipped"] = {"count": len(skips), "summary": skips.summary()}
  files = {"train": train, "dev": dev, **fields}
  return run.finish(report, kind, encoder.description, options, start,
                    f"bertjax.fine_tune({model!r}, {kind!r}, {files})")


def _predictions(options: fitting.Options, name: str = "") -> str:
  return os.path.join(options.output_dir, fitting.PREDICTIONS_DIR, name)


def _label_order(found: set[str], given: tuple[str, ...] | None, train: str, field: str,
                 outside_first: bool = False) -> tuple[str, ...]:
  """`given`, else the labels found, sorted (with `outside_first`, tagging's 'O' first, as
  CoNLL lists it)."""
  if given is not None:
    return given
  labels = tuple(sorted(found, key=lambda v: (not outside_first or v != "O", v)))
  if len(labels) < 2:
    raise ValueError(f"{train}: every row's {field!r} is {labels[0]!r}; a classifier needs "
                     "two labels or more.")
  return labels


# ----------------------------------------------------------------- texts and pairs
def _read_pairs(train: str, dev: str, kind: str, fields: dict, given, options, skips):
  text, text_pair, label = fields["text"], fields["text_pair"], fields["label"]
  train_examples, train_labels = read_examples(train, kind, text, text_pair, label, skips,
                                               given, limit=options.max_train_examples)
  labels = None
  if kind == "classification":
    labels = _label_order(set(train_labels), given, train, label)
    train_examples = [dataclasses.replace(e, label=labels.index(v))
                      for e, v in zip(train_examples, train_labels)]
  dev_examples, _ = read_examples(dev, kind, text, text_pair, label, skips, labels,
                                  options.max_eval_examples)
  task = _task(os.path.basename(train), kind, labels, text_pair is not None, train_examples)
  return task, train_examples, dev_examples


def _fit_pairs(data, opened, tokens, options) -> dict:
  task, train_examples, dev_examples = data
  _, chosen, report, _ = pipelines.fit_pairs(task, train_examples, {"dev": dev_examples},
                                             opened, tokens, options)
  if options.output_dir:
    predicted = glue_eval.predictions_from_logits(task, chosen.outputs["dev"])
    report["predictions"] = [submission.write_glue(
        _predictions(options, "dev.tsv"), [e.guid for e in dev_examples],
        [f"{v:.4f}" for v in predicted] if task.labels is None
        else [task.labels[i] for i in predicted])]
  return report


# ----------------------------------------------------------------- tagged tokens
def _read_tags(train: str, dev: str, kind: str, fields: dict, given, options, skips):
  del kind
  tokens, tags = fields["text"], fields["label"]
  train_sentences = own_files.read_sentences(train, tokens, tags, skips, given,
                                             options.max_train_examples)
  labels = _label_order({t for s in train_sentences for t in s.tags}, given, train, tags,
                        outside_first=True)
  dev_sentences = own_files.read_sentences(dev, tokens, tags, skips, labels,
                                           options.max_eval_examples)
  return labels, train_sentences, dev_sentences


def _fit_tags(data, opened, tokens, options) -> dict:
  labels, train_sentences, dev_sentences = data
  _, chosen, report, _, _ = pipelines.fit_tags(labels, train_sentences, dev_sentences, opened,
                                               tokens, options, "your tagged tokens")
  if options.output_dir:
    report["predictions"] = [submission.write_conll(_predictions(options, "dev.txt"),
                                                    dev_sentences, chosen.outputs)]
  return report


# ----------------------------------------------------------------- questions
def _read_questions(train: str, dev: str, kind: str, fields: dict, given, options, skips):
  del kind, given
  names = (fields["text"], fields["text_pair"], fields["label"])
  train_questions = own_files.read_questions(train, *names, skips, options.max_train_examples)
  dev_questions = own_files.read_questions(dev, *names, skips, options.max_eval_examples)
  # SQuAD 2.0's scoring (and its no-answer threshold) once any question has no answer.
  version = "2.0" if any(q.is_impossible for q in train_questions + dev_questions) else "1.1"
  return version, train_questions, dev_questions


def _fit_questions(data, opened, tokens, options) -> dict:
  version, train_questions, dev_questions = data
  _, chosen, report = pipelines.fit_spans(version, train_questions, dev_questions, opened,
                                          tokens, options, "your questions", "dev")
  report["squad_version"] = version
  if options.output_dir:
    answers, margins = chosen.outputs
    report["predictions"] = submission.write_squad(_predictions(options), answers,
                                                   margins if version == "2.0" else None)
  return report


KINDS = ("classification", "regression", "token_classification", "question_answering")
FIELDS = {"classification": ("text", None, "label"), "regression": ("text", None, "label"),
          "token_classification": ("tokens", None, "tags"),
          "question_answering": ("question", "context", "answers")}
READERS = {"classification": _read_pairs, "regression": _read_pairs,
           "token_classification": _read_tags, "question_answering": _read_questions}
FITS = {"classification": _fit_pairs, "regression": _fit_pairs,
        "token_classification": _fit_tags, "question_answering": _fit_questions}


def _options(output_dir: str | None, settings: dict) -> fitting.Options:
  tuning = {f.name for f in dataclasses.fields(loop.FinetuneConfig)}
  general = {f.name for f in dataclasses.fields(fitting.Options)} - {"finetune", "output_dir"}
  unknown = sorted(set(settings) - tuning - general)
  if unknown:
    raise ValueError(f"Unknown settings {unknown}; fine_tune takes FinetuneConfig's "
                     f"{sorted(tuning)} and Options' {sorted(general)}.")
  return fitting.Options(
      finetune=loop.FinetuneConfig(**{k: v for k, v in settings.items() if k in tuning}),
      output_dir=output_dir, **{k: v for k, v in settings.items() if k in general})


def _task(name: str, kind: str, labels: tuple[str, ...] | None, pairs: bool,
          train: list[glue_eval.PairExample]) -> glue_eval.GlueTask:
  """The files as a GLUE task: its labels, metrics and (for a score) the centring the
  head trains in, from the training scores."""
  center, scale = 0.0, 1.0
  if labels is None:
    scores = np.array([e.label for e in train], np.float64)
    center, scale = float(scores.mean()), float(scores.std()) or 1.0
  return glue_eval.GlueTask(name, "", (0, 1) if pairs else (0,), 0, labels, METRICS[kind],
                            label_center=center, label_scale=scale)
