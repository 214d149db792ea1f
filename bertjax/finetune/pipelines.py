"""One function per task family: read -> features -> fine-tune -> select -> predict.

Each run trains its encoder family's transformers task class (`task_models`: GLUE
...ForSequenceClassification, SQuAD ...ForQuestionAnswering, CoNLL-2003
...ForTokenClassification, SWAG ...ForMultipleChoice) through `fitting` (evaluated on dev
after every epoch, the best epoch kept), scores and writes predictions with the best
epoch's params, and returns a JSON-able report: the scores of every split and epoch, the
best epoch, sizes, what the readers skipped, the training curve. With
`Options.output_dir`, predictions go to OUTPUT_DIR/predictions/ in each benchmark's
submission format (`submission`); what else is written there, `fitting` says.
"""
import os
import time
from typing import Any

import numpy as np
from absl import logging

from bertjax.checkpoints import encoders
from bertjax.evaluation import conll, readers
from bertjax.evaluation import glue as glue_eval, squad as squad_eval, swag as swag_eval
from bertjax.finetune import feature_based, fitting, glue, ner, packing, squad, submission
from bertjax.finetune import swag, task_models
from bertjax.finetune.fitting import Options
from bertjax.objectives import downstream as objectives
from bertjax.finetune.tokenization import Tokenizer


def run_glue(task_name: str, encoder: encoders.Encoder, tokenizer: Tokenizer,
             options: Options) -> dict[str, Any]:
  task = glue_eval.get_task(task_name)
  skips = readers.SkipLog()
  train = glue_eval.read_examples(task, "train", skips, options.data_dir,
                                  options.max_train_examples)
  dev_sets = {split: glue_eval.read_examples(task, split, skips, options.data_dir,
                                             options.max_eval_examples)
              for split in task.eval_splits}
  tuner, chosen, report, convert = fit_pairs(task, train, dev_sets, encoder, tokenizer, options)
  if options.output_dir:
    written = []
    for split, name in zip(task.eval_splits, task.submission_names):
      written.append(submission.write_glue(
          fitting.predictions_path(options, "dev", f"{name}.tsv"),
          [e.guid for e in dev_sets[split]],
          glue_eval.submission_labels(task, chosen.outputs[split])))
    if options.predict_test:
      for split, name in zip(task.test_splits, task.submission_names):
        if not os.path.exists(task.path(split, options.data_dir)):
          continue
        examples = glue_eval.read_test_examples(task, split, skips, options.data_dir,
                                                options.max_eval_examples)
        packer = fitting.choose_packer(encoder, task_models.SEQUENCE, options)
        logits = fitting.predict(tuner, packer, convert(examples), ("logits",))["logits"]
        written.append(submission.write_glue(
            fitting.predictions_path(options, "test", f"{name}.tsv"), [e.guid for e in examples],
            glue_eval.submission_labels(task, logits)))
    report["predictions"] = written
  report["skipped"] = {"count": len(skips), "summary": skips.summary()}
  return report


def fit_pairs(task: glue_eval.GlueTask, train: list[glue_eval.PairExample],
              dev_sets: dict[str, list[glue_eval.PairExample]], encoder: encoders.Encoder,
              tokenizer: Tokenizer, options: Options):
  """A GLUE-style task (texts or pairs, labels or a score) fine-tuned on `train`, selected
  on the first of `dev_sets` by the task's first metric: (finetuner, selection, report, the
  examples -> inputs converter). A GLUE benchmark's files and your own
  (`finetune.own_data`) both come here."""
  model = task_models.build(
      encoder, task_models.SEQUENCE, task.names or ("score",),
      regression=(task.label_center, task.label_scale) if task.is_regression else None,
      pooling=options.pooling, fresh_head=options.fresh_head, label_values=task.labels)
  convert = lambda examples: encoder.fit_inputs(
      glue.convert_examples(examples, tokenizer, options.max_seq_length))
  converted = {split: (examples, convert(examples)) for split, examples in dev_sets.items()}
  packer = fitting.choose_packer(encoder, task_models.SEQUENCE, options)

  def evaluate(tuner):
    scores, logits = {}, {}
    for split, (examples, arrays) in converted.items():
      start = time.time()
      logits[split] = fitting.predict(tuner, packer, arrays, ("logits",))["logits"]
      scores[split] = {**glue_eval.evaluate(task, logits[split], arrays["labels"]),
                       "examples": len(examples), "eval_time_s": time.time() - start}
    return scores, logits

  objective = (objectives.Regression(task.label_center, task.label_scale) if task.is_regression
               else objectives.Classification())
  first_split = next(iter(dev_sets))
  tuner, chosen, report = fitting.fit_task(model, objective, convert(train), options, evaluate,
                                           f"{first_split}/{task.metrics[0]}", task.name,
                                           packer)
  report["packing"][first_split] = packer.report(converted[first_split][1])
  logging.info("%s best epoch: %s", task.name, chosen.scores)
  return tuner, chosen, report, convert


def run_squad(task_name: str, encoder: encoders.Encoder, tokenizer: Tokenizer,
              options: Options) -> dict[str, Any]:
  """SQuAD from one JSON file split by article: the first `squad_train_articles`
  articles train, the rest evaluate (here: the public v1.1 dev set, as no train
  split is available). `max_train_examples` draws a seeded random subset of the
  training questions. Selection: F1 (2.0: F1 at the best threshold, tuned on dev)."""
  version = {"squad11": "1.1", "squad20": "2.0"}[task_name]
  path = options.squad_file or squad_eval.default_path()
  skips = readers.SkipLog()
  train, held_out = squad_eval.split_by_article(squad_eval.read_examples(path, skips),
                                                options.squad_train_articles)
  if not train or not held_out:
    raise ValueError(f"{path}: splitting at article {options.squad_train_articles} leaves "
                     f"{len(train)} training and {len(held_out)} evaluation questions.")
  if options.max_train_examples and options.max_train_examples < len(train):
    rng = np.random.default_rng(options.finetune.seed)
    keep = np.sort(rng.choice(len(train), options.max_train_examples, replace=False))
    train = [train[i] for i in keep]
  held_out = held_out[:options.max_eval_examples]
  _, chosen, report = fit_spans(version, train, held_out, encoder, tokenizer, options,
                                f"SQuAD {version}", "held_out",
                                {"articles": len({e.article for e in held_out})})
  logging.info("%s held-out (best epoch): %s", task_name, chosen.scores["held_out"])
  if options.output_dir:
    answers, margins = chosen.outputs
    report["predictions"] = submission.write_squad(
        fitting.predictions_path(options), answers, margins if version == "2.0" else None)
  report["skipped"] = {"count": len(skips), "summary": skips.summary()}
  return report


def fit_spans(version: str, train: list[squad_eval.SquadExample],
              held_out: list[squad_eval.SquadExample], encoder: encoders.Encoder,
              tokenizer: Tokenizer, options: Options, what: str, split: str,
              facts: dict[str, Any] | None = None):
  """Extractive QA (SQuAD `version` '1.1', or '2.0' with questions without an answer)
  fine-tuned on `train`, selected on `held_out` (scored as `split`, with `facts` about it)
  by F1 (2.0: F1 at the best no-answer threshold): (finetuner, selection, report).
  SQuAD's file and your own (`finetune.own_data`) both come here; the selection's outputs
  are the best epoch's (answers, no-answer margins)."""
  model = task_models.build(encoder, task_models.SPANS, fresh_head=options.fresh_head)
  window = dict(max_seq_length=options.max_seq_length, doc_stride=options.doc_stride,
                max_query_length=options.max_query_length)
  arrays = encoder.fit_inputs(squad.convert_examples(train, tokenizer, training=True, **window))
  features = encoder.fit_inputs(squad.convert_examples(held_out, tokenizer, training=False,
                                                       **window))
  model_keys = ("input_ids", "attention_mask", "token_type_ids", "start_positions",
                "end_positions")
  golds = {e.qid: list(e.answer_texts) for e in held_out}
  packer = fitting.choose_packer(encoder, task_models.SPANS, options)

  def evaluate(tuner):
    start = time.time()
    logits = fitting.predict(tuner, packer, {k: features[k] for k in model_keys[:3]},
                             ("start_logits", "end_logits"))
    spans = squad.postprocess(held_out, features, logits["start_logits"], logits["end_logits"],
                              options.n_best_size, options.max_answer_length)
    answers, margins = squad.final_answers(spans, version, options.null_threshold)
    scores = squad_eval.evaluate(golds, answers, version,
                                 na_scores=margins if version == "2.0" else None,
                                 threshold=options.null_threshold)
    return {split: {**scores, "questions": len(held_out), **(facts or {}),
                    "features": len(features["input_ids"]),
                    "eval_time_s": time.time() - start}}, (answers, margins)

  metric = f"{split}/f1" if version == "1.1" else f"{split}/best_f1"
  tuner, chosen, report = fitting.fit_task(model, objectives.SpanExtraction(),
                                           {k: arrays[k] for k in model_keys}, options,
                                           evaluate, metric, what, packer)
  report["packing"][split] = packer.report(features)
  report["train_questions"] = len(train)
  return tuner, chosen, report


_NER_INPUTS = ("input_ids", "attention_mask", "token_type_ids")
_NER_TRAIN = _NER_INPUTS + ("labels", "label_weights")


def _conll_sentences(options: Options, skips: readers.SkipLog):
  """CoNLL-2003's first N training and dev sentences."""
  train = conll.read_sentences(conll.path("train", options.data_dir), skips)
  dev = conll.read_sentences(conll.path("dev", options.data_dir), skips)
  return train[:options.max_train_examples], dev[:options.max_eval_examples]


def _ner_scores(tuner, sentences, arrays, packer: packing.Packing,
                labels: tuple[str, ...] = conll.LABELS
                ) -> tuple[dict[str, Any], list[list[str]]]:
  start = time.time()
  logits = fitting.predict(tuner, packer, {k: arrays[k] for k in _NER_INPUTS},
                           ("logits",))["logits"]
  scores = ner.evaluate(logits, arrays, sentences, labels)
  return ({**scores, "sentences": len(sentences), "eval_time_s": time.time() - start},
          ner.word_tags(logits, arrays["first_piece"], sentences, labels))


def run_ner(encoder: encoders.Encoder, tokenizer: Tokenizer, options: Options) -> dict[str, Any]:
  """CoNLL-2003: fine-tune on the first N training sentences, select on dev; the test
  file (public, with gold tags) is scored and predicted with the selected params."""
  skips = readers.SkipLog()
  train, dev = _conll_sentences(options, skips)
  tuner, chosen, report, convert, packer = fit_tags(conll.LABELS, train, dev, encoder,
                                                    tokenizer, options, "CoNLL-2003")
  logging.info("conll2003 dev (best epoch): f1=%.4f", chosen.scores["dev"]["f1"])
  written = []
  if options.output_dir:
    written.append(submission.write_conll(
        fitting.predictions_path(options, "conll2003_dev.txt"), dev, chosen.outputs))
  test_path = conll.path("test", options.data_dir)
  if options.predict_test and os.path.exists(test_path):
    test = conll.read_sentences(test_path, skips)[:options.max_eval_examples]
    scores, tags = _ner_scores(tuner, test, convert(test), packer)
    report["eval"]["test"] = scores
    if options.output_dir:
      written.append(submission.write_conll(
          fitting.predictions_path(options, "conll2003_test.txt"), test, tags))
  if written:
    report["predictions"] = written
  report["skipped"] = {"count": len(skips), "summary": skips.summary()}
  return report


def fit_tags(labels: tuple[str, ...], train: list[conll.Sentence], dev: list[conll.Sentence],
             encoder: encoders.Encoder, tokenizer: Tokenizer, options: Options, what: str):
  """Token classification over `labels` (entity tags: O, B-/I-/E-/S-<type>) fine-tuned on
  `train`, selected on `dev` by conlleval's entity F1: (finetuner, selection, report, the
  sentences -> inputs converter, how it packs). CoNLL-2003's files and your own
  (`finetune.own_data`) both come here; the selection's outputs are the best epoch's dev word
  tags."""
  model = task_models.build(encoder, task_models.TOKENS, labels, fresh_head=options.fresh_head)
  convert = lambda sentences: ner.convert_sentences(sentences, tokenizer,
                                                    options.max_seq_length, labels)
  train_arrays, dev_arrays = convert(train), convert(dev)
  packer = fitting.choose_packer(encoder, task_models.TOKENS, options)

  def evaluate(tuner):
    scores, tags = _ner_scores(tuner, dev, dev_arrays, packer, labels)
    return {"dev": scores}, tags

  tuner, chosen, report = fitting.fit_task(model, objectives.TokenClassification(),
                                           {k: train_arrays[k] for k in _NER_TRAIN}, options,
                                           evaluate, "dev/f1", what, packer)
  report["packing"]["dev"] = packer.report(dev_arrays)
  return tuner, chosen, report, convert, packer


def run_feature_based(encoder: encoders.Encoder, tokenizer: Tokenizer, options: Options,
                      mode: str) -> dict[str, Any]:
  """BERT Table 7 on CoNLL-2003: frozen encoder, BiLSTM tagger per feature choice, each
  selected on dev by epoch (checkpoints under OUTPUT_DIR/feature_<mode>/).

  `mode` is one of feature_based.MODES or "all" (every mode over one extraction)."""
  modes = feature_based.MODES if mode == "all" else (mode,)
  encoder = encoders.base_encoder(encoder)
  skips = readers.SkipLog()
  train, dev = _conll_sentences(options, skips)
  train_arrays, dev_arrays = (ner.convert_sentences(s, tokenizer, options.max_seq_length)
                              for s in (train, dev))
  start = time.time()
  # The encoder runs per token.
  packer = fitting.choose_packer(encoder, task_models.TOKENS, options)
  states = {name: feature_based.extract(encoder.module, encoder.params, arrays,
                                        options.finetune.eval_batch_size, packer)
            for name, arrays in (("train", train_arrays), ("dev", dev_arrays))}
  report: dict[str, Any] = {"train_rows": len(train), "extract_time_s": time.time() - start,
                            "eval": {}, "predictions": [],
                            "packing": {"train": packer.report(train_arrays),
                                        "dev": packer.report(dev_arrays)}}
  positions = np.where(dev_arrays["first_piece"] >= 0,
                       np.arange(dev_arrays["first_piece"].shape[1]), -1)
  for name in modes:
    start = time.time()
    word = {split: feature_based.word_arrays(states[split], arrays["first_piece"],
                                             arrays["labels"], name)
            for split, arrays in (("train", train_arrays), ("dev", dev_arrays))}

    def evaluate(tuner, word=word):
      logits = tuner.predict(word["dev"], ("logits",))["logits"]
      return ({"dev": ner.evaluate(logits, {"first_piece": positions}, dev)},
              ner.word_tags(logits, positions, dev))

    tagger = feature_based.FeatureTagger(name, len(conll.LABELS))
    # The tagger starts from scratch.
    _, chosen, trained = fitting.fit(tagger, feature_based.WordTagging(), word["train"], {},
                                     options, evaluate, "dev/f1", name=f"feature_{name}")
    scores = chosen.scores["dev"]
    logging.info("feature-based %s dev (best epoch): f1=%.4f", name, scores["f1"])
    report["eval"][name] = {**scores, "train_steps": trained["train_steps"],
                            "train_time_s": trained["train_time_s"],
                            "best_epoch": trained["best_epoch"], "epochs": trained["epochs"],
                            "time_s": time.time() - start}
    if options.output_dir:
      report["predictions"].append(submission.write_conll(
          fitting.predictions_path(options, f"conll2003_dev_{name}.txt"), dev, chosen.outputs))
  report["skipped"] = {"count": len(skips), "summary": skips.summary()}
  return report


def run_swag(encoder: encoders.Encoder, tokenizer: Tokenizer, options: Options) -> dict[str, Any]:
  """SWAG (regular/train.csv, val.csv under DATA_DIR/swag): 4-way multiple choice."""
  model = task_models.build(encoder, task_models.CHOICES, pooling=options.pooling,
                            fresh_head=options.fresh_head)
  skips = readers.SkipLog()
  train = swag_eval.read_examples(swag_eval.path("train", options.data_dir), skips)
  dev = swag_eval.read_examples(swag_eval.path("val", options.data_dir), skips)
  train, dev = train[:options.max_train_examples], dev[:options.max_eval_examples]
  arrays = encoder.fit_inputs(swag.convert_examples(train, tokenizer, options.max_seq_length))
  dev_arrays = encoder.fit_inputs(swag.convert_examples(dev, tokenizer, options.max_seq_length))

  def evaluate(tuner):
    start = time.time()
    logits = tuner.predict(dev_arrays, ("logits",))["logits"]
    return ({"val": {"accuracy": swag_eval.accuracy(logits, dev_arrays["labels"]),
                     "examples": len(dev), "eval_time_s": time.time() - start}},
            logits.argmax(-1))

  _, chosen, report = fitting.fit_task(
      model, objectives.Classification(), arrays, options, evaluate, "val/accuracy", "SWAG",
      fitting.choose_packer(encoder, task_models.CHOICES, options))
  if options.output_dir:
    report["predictions"] = [submission.write_swag(
        fitting.predictions_path(options, "swag_val.csv"), chosen.outputs)]
  report["skipped"] = {"count": len(skips), "summary": skips.summary()}
  return report
