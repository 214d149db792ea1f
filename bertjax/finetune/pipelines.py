"""One function per task family: read -> features -> fine-tune -> predict -> score.

Each returns a JSON-able report: the metrics of every evaluation split, how many
examples / features were used, what the readers skipped, and the training curve.
"""
import dataclasses
import math
import time
from typing import Any

import numpy as np
from absl import logging

from bertjax.finetune import (encoders, feature_based, glue, heads, loop, ner, objectives, readers,
                              squad, squad_metrics, swag)
from bertjax.finetune.tokenization import WordPiece


@dataclasses.dataclass(frozen=True)
class Options:
  """Everything a run needs besides the task and the encoder (flags of `run.py`)."""
  finetune: loop.FinetuneConfig = loop.FinetuneConfig()
  max_seq_length: int = 128
  max_train_examples: int | None = None  # keep the first N training examples
  max_eval_examples: int | None = None
  max_steps: int | None = None           # overrides num_epochs
  pooling: str = "pooler"
  data_dir: str | None = None
  # SQuAD
  doc_stride: int = 128
  max_query_length: int = 64
  max_answer_length: int = 30
  n_best_size: int = 20
  squad_file: str | None = None
  squad_train_articles: int = 38
  null_threshold: float = 0.0


def num_train_steps(num_examples: int, options: Options) -> int:
  if options.max_steps:
    return options.max_steps
  per_epoch = max(num_examples // min(options.finetune.batch_size, num_examples), 1)
  return max(1, math.ceil(options.finetune.num_epochs * per_epoch))


def _train(model, objective, arrays, encoder: encoders.Encoder, options: Options,
           frozen: tuple[str, ...] = ()) -> tuple[loop.Finetuner, dict[str, Any]]:
  n = loop.num_rows(arrays)
  steps = num_train_steps(n, options)
  start = time.time()
  tuner = loop.Finetuner(model, objective, arrays, options.finetune, steps, encoder.params,
                         frozen=frozen)
  history = tuner.train(arrays, steps)
  return tuner, {"train_rows": n, "train_steps": steps, "history": history,
                 "train_time_s": time.time() - start}


def run_glue(task_name: str, encoder: encoders.Encoder, tokenizer: WordPiece,
             options: Options) -> dict[str, Any]:
  task = glue.get_task(task_name)
  skips = readers.SkipLog()
  train = glue.read_examples(task, "train", skips, options.data_dir, options.max_train_examples)
  arrays = glue.convert_examples(train, tokenizer, options.max_seq_length)
  model = heads.SequenceClassifier(encoder.module, task.num_labels, pooling=options.pooling,
                                   dropout_rate=0.1)
  objective = (objectives.Regression(task.label_center, task.label_scale) if task.is_regression
               else objectives.Classification())
  tuner, report = _train(model, objective, arrays, encoder, options)
  report["eval"] = {}
  for split in task.eval_splits:
    start = time.time()
    examples = glue.read_examples(task, split, skips, options.data_dir, options.max_eval_examples)
    dev = glue.convert_examples(examples, tokenizer, options.max_seq_length)
    logits = tuner.predict(dev, ("logits",))["logits"]
    scores = glue.evaluate(task, logits, dev["labels"])
    logging.info("%s %s: %s", task.name, split, scores)
    report["eval"][split] = {**scores, "examples": len(examples),
                             "eval_time_s": time.time() - start}
  report["skipped"] = {"count": len(skips), "summary": skips.summary()}
  return report


def run_squad(task_name: str, encoder: encoders.Encoder, tokenizer: WordPiece,
              options: Options) -> dict[str, Any]:
  """SQuAD from one JSON file split by article: the first `squad_train_articles`
  articles train, the rest evaluate (here: the public v1.1 dev set, as no train
  split is available). `max_train_examples` draws a seeded random subset of the
  training questions."""
  version = {"squad11": "1.1", "squad20": "2.0"}[task_name]
  path = options.squad_file or squad.default_path()
  skips = readers.SkipLog()
  train, held_out = squad.split_by_article(squad.read_examples(path, skips),
                                           options.squad_train_articles)
  if not train or not held_out:
    raise ValueError(f"{path}: splitting at article {options.squad_train_articles} leaves "
                     f"{len(train)} training and {len(held_out)} evaluation questions.")
  if options.max_train_examples and options.max_train_examples < len(train):
    rng = np.random.default_rng(options.finetune.seed)
    keep = np.sort(rng.choice(len(train), options.max_train_examples, replace=False))
    train = [train[i] for i in keep]
  held_out = held_out[:options.max_eval_examples]
  window = dict(max_seq_length=options.max_seq_length, doc_stride=options.doc_stride,
                max_query_length=options.max_query_length)
  arrays = squad.convert_examples(train, tokenizer, training=True, **window)
  model_keys = ("input_ids", "attention_mask", "token_type_ids", "start_positions",
                "end_positions")
  tuner, report = _train(heads.SpanExtractor(encoder.module), objectives.SpanExtraction(),
                         {k: arrays[k] for k in model_keys}, encoder, options)
  report["train_questions"] = len(train)

  start = time.time()
  features = squad.convert_examples(held_out, tokenizer, training=False, **window)
  logits = tuner.predict({k: features[k] for k in model_keys[:3]},
                         ("start_logits", "end_logits"))
  spans = squad.postprocess(held_out, features, logits["start_logits"], logits["end_logits"],
                            options.n_best_size, options.max_answer_length)
  answers, margins = squad.final_answers(spans, version, options.null_threshold)
  golds = {e.qid: list(e.answer_texts) for e in held_out}
  scores = squad_metrics.evaluate(golds, answers, version,
                                  na_scores=margins if version == "2.0" else None,
                                  threshold=options.null_threshold)
  logging.info("%s held-out: %s", task_name, scores)
  report["eval"] = {"held_out": {**scores, "questions": len(held_out),
                                 "articles": len({e.article for e in held_out}),
                                 "features": len(features["input_ids"]),
                                 "eval_time_s": time.time() - start}}
  report["skipped"] = {"count": len(skips), "summary": skips.summary()}
  return report


def _ner_data(tokenizer: WordPiece, options: Options, skips: readers.SkipLog):
  train = ner.read_sentences(ner.path("train", options.data_dir), skips)
  dev = ner.read_sentences(ner.path("dev", options.data_dir), skips)
  train, dev = train[:options.max_train_examples], dev[:options.max_eval_examples]
  convert = lambda s: ner.convert_sentences(s, tokenizer, options.max_seq_length)
  return train, convert(train), dev, convert(dev)


def run_ner(encoder: encoders.Encoder, tokenizer: WordPiece, options: Options) -> dict[str, Any]:
  """CoNLL-2003: fine-tune on the first N training sentences, score the dev set."""
  skips = readers.SkipLog()
  train, train_arrays, dev, dev_arrays = _ner_data(tokenizer, options, skips)
  model_keys = ("input_ids", "attention_mask", "token_type_ids", "labels", "label_weights")
  tuner, report = _train(heads.TokenClassifier(encoder.module, len(ner.LABELS)),
                         objectives.TokenClassification(),
                         {k: train_arrays[k] for k in model_keys}, encoder, options)
  start = time.time()
  logits = tuner.predict({k: dev_arrays[k] for k in model_keys[:3]}, ("logits",))["logits"]
  scores = ner.evaluate(logits, dev_arrays, dev)
  logging.info("conll2003 dev: %s", {k: v for k, v in scores.items() if k != "per_type"})
  report["eval"] = {"dev": {**scores, "sentences": len(dev), "eval_time_s": time.time() - start}}
  report["skipped"] = {"count": len(skips), "summary": skips.summary()}
  return report


def run_feature_based(encoder: encoders.Encoder, tokenizer: WordPiece, options: Options,
                      mode: str) -> dict[str, Any]:
  """BERT Table 7 on CoNLL-2003: frozen encoder, BiLSTM tagger per feature choice.

  `mode` is one of feature_based.MODES or "all" (every mode over one extraction)."""
  modes = feature_based.MODES if mode == "all" else (mode,)
  skips = readers.SkipLog()
  train, train_arrays, dev, dev_arrays = _ner_data(tokenizer, options, skips)
  start = time.time()
  states = {name: feature_based.extract(encoder.module, encoder.params, arrays,
                                        options.finetune.eval_batch_size)
            for name, arrays in (("train", train_arrays), ("dev", dev_arrays))}
  report: dict[str, Any] = {"train_rows": len(train), "extract_time_s": time.time() - start,
                            "eval": {}}
  frozen_encoder = dataclasses.replace(encoder, params=None)  # the tagger starts from scratch
  for name in modes:
    start = time.time()
    word = {split: feature_based.word_arrays(states[split], arrays["first_piece"],
                                             arrays["labels"], name)
            for split, arrays in (("train", train_arrays), ("dev", dev_arrays))}
    tagger = feature_based.FeatureTagger(name, len(ner.LABELS))
    tuner, trained = _train(tagger, feature_based.WordTagging(), word["train"], frozen_encoder,
                            options)
    logits = tuner.predict(word["dev"], ("logits",))["logits"]
    positions = np.where(dev_arrays["first_piece"] >= 0,
                         np.arange(dev_arrays["first_piece"].shape[1]), -1)
    scores = ner.evaluate(logits, {"first_piece": positions}, dev)
    logging.info("feature-based %s dev: f1=%.4f", name, scores["f1"])
    report["eval"][name] = {**scores, "train_steps": trained["train_steps"],
                            "train_time_s": trained["train_time_s"],
                            "time_s": time.time() - start}
  report["skipped"] = {"count": len(skips), "summary": skips.summary()}
  return report


def run_swag(encoder: encoders.Encoder, tokenizer: WordPiece, options: Options) -> dict[str, Any]:
  """SWAG (regular/train.csv, val.csv under DATA_DIR/swag): 4-way multiple choice."""
  skips = readers.SkipLog()
  train = swag.read_examples(swag.path("train", options.data_dir), skips)
  dev = swag.read_examples(swag.path("val", options.data_dir), skips)
  train, dev = train[:options.max_train_examples], dev[:options.max_eval_examples]
  arrays = swag.convert_examples(train, tokenizer, options.max_seq_length)
  tuner, report = _train(heads.MultipleChoice(encoder.module, pooling=options.pooling),
                         objectives.Classification(), arrays, encoder, options)
  start = time.time()
  dev_arrays = swag.convert_examples(dev, tokenizer, options.max_seq_length)
  logits = tuner.predict(dev_arrays, ("logits",))["logits"]
  report["eval"] = {"val": {"accuracy": swag.accuracy(logits, dev_arrays["labels"]),
                            "examples": len(dev), "eval_time_s": time.time() - start}}
  report["skipped"] = {"count": len(skips), "summary": skips.summary()}
  return report
