"""Fine-tuning on your own files, from Python.

  report = bertjax.fine_tune("CKPT", "classification", "train.csv", "dev.csv",
                             text="review", label="sentiment", output_dir="OUT")
  bertjax.pipeline("text-classification", "OUT")("a gripping film")

A text (or a pair: `text_pair=COLUMN`) and a label (`classification`: any strings, the
model's labels by name, in sorted order) or a score (`regression`) per row of a .csv, .tsv
(both with a header naming the columns) or .jsonl file. The run is `finetune.run`'s GLUE
run (`pipelines.fit_pairs`): the same featurizer, head, training loop, selection of the
best epoch on dev (accuracy; Pearson for a score) and outputs (OUT is the fine-tuned
transformers class, with results.json, metrics.jsonl, loss_curve.png and the dev
predictions in OUT/predictions/dev.tsv). Settings are FinetuneConfig's and Options' fields
(learning_rate=..., num_epochs=..., max_seq_length=...).
"""
import dataclasses
import os
import time

import numpy as np

from bertjax.evaluation import glue as glue_eval, readers
from bertjax.finetune import loop, pipelines, resume, run, submission

KINDS = ("classification", "regression")
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
      skips.skip(path, number, f"label {value!r} is not one of the training labels {labels}")
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


def fine_tune(model: str, kind: str, train: str, dev: str, *, text: str = "text",
              text_pair: str | None = None, label: str = "label",
              output_dir: str | None = None, tokenizer: str | None = None,
              overwrite: bool = False, **settings) -> dict:
  """Fine-tunes `model` (any folder bertjax.open_model reads) on `train`, selecting the
  best epoch on `dev`; returns the report `finetune.run` writes (results.json).

  kind: 'classification' or 'regression'; text / text_pair / label: the files' column
  (or JSON field) names; settings: FinetuneConfig fields (learning_rate, batch_size,
  num_epochs, ...) and Options fields (max_seq_length, max_train_examples, ...). An
  existing output_dir is refused unless `overwrite`, as finetune.run refuses it."""
  start = time.time()
  if kind not in KINDS:
    raise ValueError(f"kind={kind!r}: use one of {KINDS}.")
  options = _options(output_dir, settings)
  skips = readers.SkipLog()
  train_examples, train_labels = read_examples(train, kind, text, text_pair, label, skips,
                                               limit=options.max_train_examples)
  labels = None if kind == "regression" else tuple(sorted(set(train_labels)))
  if labels is not None:
    if len(labels) < 2:
      raise ValueError(f"{train}: every row's {label!r} is {labels[0]!r}; a classifier needs "
                       "two labels or more.")
    train_examples = [dataclasses.replace(e, label=labels.index(v))
                      for e, v in zip(train_examples, train_labels)]
  dev_examples, _ = read_examples(dev, kind, text, text_pair, label, skips, labels,
                                  options.max_eval_examples)
  task = _task(os.path.basename(train), kind, labels, text_pair is not None, train_examples)
  opened, encoder, tokens = run.open_for_finetuning(model, tokenizer, options)
  if options.output_dir:
    resume.claim(options.output_dir, "output_dir", overwrite,
                 reads=[model, tokenizer, train, dev])  # resumes a stopped fine_tune
    os.makedirs(options.output_dir, exist_ok=True)
  tuner, chosen, report, _ = pipelines.fit_pairs(task, train_examples, {"dev": dev_examples},
                                                 opened, tokens, options)
  del tuner
  if options.output_dir:
    predicted = glue_eval.predictions_from_logits(task, chosen.outputs["dev"])
    report["predictions"] = [submission.write_glue(
        os.path.join(options.output_dir, pipelines.PREDICTIONS_DIR, "dev.tsv"),
        [e.guid for e in dev_examples],
        [f"{v:.4f}" for v in predicted] if labels is None else [labels[i] for i in predicted])]
  report["skipped"] = {"count": len(skips), "summary": skips.summary()}
  files = {"train": train, "dev": dev, "text": text, "text_pair": text_pair, "label": label}
  return run.finish(report, kind, encoder.description, options, start,
                    f"bertjax.fine_tune({model!r}, {kind!r}, {files})")


def _options(output_dir: str | None, settings: dict) -> pipelines.Options:
  tuning = {f.name for f in dataclasses.fields(loop.FinetuneConfig)}
  general = {f.name for f in dataclasses.fields(pipelines.Options)} - {"finetune", "output_dir"}
  unknown = sorted(set(settings) - tuning - general)
  if unknown:
    raise ValueError(f"Unknown settings {unknown}; fine_tune takes FinetuneConfig's "
                     f"{sorted(tuning)} and Options' {sorted(general)}.")
  return pipelines.Options(
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
