"""One function per task family: read -> features -> fine-tune -> select -> predict.

Each run trains its encoder family's transformers task class (`task_models`: GLUE
...ForSequenceClassification, SQuAD ...ForQuestionAnswering, CoNLL-2003
...ForTokenClassification, SWAG ...ForMultipleChoice), evaluates on dev after every
epoch, keeps the best epoch's params (`selection.fit`: Orbax checkpoints, keep-best on
the task's main metric), scores and writes predictions with them, and returns a
JSON-able report: the scores of every split and epoch, the best epoch, sizes, what the
readers skipped, the training curve. With `Options.output_dir`, predictions go to
OUTPUT_DIR/predictions/ in each benchmark's submission format (`submission`),
the train rows and per-epoch scores to OUTPUT_DIR/metrics.jsonl, OUTPUT_DIR/tensorboard/
and OUTPUT_DIR/loss_curve.png, each evaluated epoch's params to OUTPUT_DIR/checkpoints/
while the run selects (the best kept), and the best model to OUTPUT_DIR itself (then the
one copy of its weights; generic heads keep checkpoints/) as a converted checkpoint of its transformers class (params/ + metadata.json +
tokenizer files: `bertjax.open_model(OUTPUT_DIR)`, `python -m bertjax.convert
--to_hf=DIR --checkpoint=OUTPUT_DIR`).
"""
import contextlib
import dataclasses
import math
import os
import shutil
import tempfile
import time
from typing import Any

import gin
import numpy as np
from absl import logging

from bertjax import checkpoints
from bertjax.configurables import typechecked
from bertjax.checkpoints import encoders
from bertjax.evaluation import conll, readers
from bertjax.evaluation import glue as glue_eval, squad as squad_eval, swag as swag_eval
from bertjax.finetune import feature_based, glue, loop, ner, packing, selection, squad
from bertjax.finetune import submission, swag
from bertjax.finetune import task_models
from bertjax.objectives import downstream as objectives
from bertjax.finetune.tokenization import Tokenizer
from bertjax.train import setup as train_setup

PREDICTIONS_DIR = "predictions"
_EXAMPLES_PER_ROW = packing.DEFAULT_EXAMPLES_PER_ROW  # (Options.packing hides the module)


@dataclasses.dataclass(frozen=True)
class Options:
  """Everything a run needs besides the task and the encoder (gin: `Options.<field>`)."""
  finetune: loop.FinetuneConfig = dataclasses.field(default_factory=loop.FinetuneConfig)
  output_dir: str | None = None   # checkpoints, metrics.jsonl, predictions/; None: kept nowhere
  max_seq_length: int = 128
  max_train_examples: int | None = None  # keep the first N training examples
  max_eval_examples: int | None = None
  max_steps: int | None = None           # overrides num_epochs
  eval_each_epoch: bool = True           # False: evaluate (and select) only at the end
  predict_test: bool = True              # also predict the test split where one exists
  # "pooler": the family's transformers head; "cls" / "mean": BERT's head over raw [CLS] /
  # the mean (an ablation, not exportable).
  pooling: str = "pooler"
  fresh_head: bool = False  # a checkpoint of the task's class: train a new head anyway
  # Several examples per row (finetune.packing) where the model can pack the task; False:
  # one example per row, as before.
  packing: bool = True
  max_examples_per_row: int = _EXAMPLES_PER_ROW
  data_dir: str | None = None
  # SQuAD
  doc_stride: int = 128
  max_query_length: int = 64
  max_answer_length: int = 30
  n_best_size: int = 20
  squad_file: str | None = None
  squad_train_articles: int = 38
  null_threshold: float = 0.0

  def __post_init__(self):
    if self.max_examples_per_row < 1:
      raise ValueError(f"Options.max_examples_per_row = {self.max_examples_per_row} "
                       "(--max_examples_per_row): give 1 or more.")


Options.__init__ = typechecked(Options.__init__)
Options = gin.configurable(Options)


def num_train_steps(num_examples: int, options: Options) -> int:
  if options.max_steps:
    return options.max_steps
  per_epoch = loop.steps_per_epoch(num_examples, options.finetune.batch_size)
  return max(1, math.ceil(options.finetune.num_epochs * per_epoch))


@contextlib.contextmanager
def _work_dir(options: Options, name: str = ""):
  """OUTPUT_DIR[/name] for checkpoints and metrics; a temporary folder without one."""
  if options.output_dir:
    yield os.path.join(options.output_dir, name)
  else:
    with tempfile.TemporaryDirectory(prefix="bertjax_finetune_") as tmp:
      yield tmp


def _predictions_path(options: Options, *parts: str) -> str | None:
  return os.path.join(options.output_dir, PREDICTIONS_DIR, *parts) if options.output_dir else None


def _fit(model, objective, arrays, init: dict, options: Options,
         evaluate: selection.Evaluate, metric: str, name: str = "",
         frozen: tuple[str, ...] = (), banner: str | None = None,
         packer: packing.Packing | None = None
         ) -> tuple[loop.Finetuner, selection.Selection, dict]:
  """Fine-tunes with evaluation after each epoch; the finetuner ends on the best epoch.

  init: the weights to start from, {'encoder': ..., 'head': ...} (either may be absent);
  banner: what is fine-tuned on what, printed with the run's size before it starts;
  packer: trains on packed rows when enabled (batches of about as many examples)."""
  n = loop.num_rows(arrays)
  config, packed_report = options.finetune, None
  if packer is not None:
    packed_report = packer.report(arrays, config.seed)
    logging.info("Packing of the training rows: %s", packed_report)
  if packer is not None and packer.enabled:
    # Rows per batch split as the unpacked batch would: over microbatches and devices.
    devices = train_setup.data_parallel_mesh(*config.split_rows).devices.size
    arrays, rows_per_batch = packer.train_rows(arrays, config.batch_size,
                                               config.num_microbatches * devices, config.seed)
    config = dataclasses.replace(config, batch_size=rows_per_batch)
  steps = num_train_steps(loop.num_rows(arrays), dataclasses.replace(options, finetune=config))
  if banner:
    rows = (f"{n} training examples in {loop.num_rows(arrays)} packed rows" if n !=
            loop.num_rows(arrays) else f"{n} training rows")
    print(f"{banner}: {rows}, {steps} steps of batch {config.batch_size}, "
          f"peak learning rate {config.learning_rate:g}.", flush=True)
  start = time.time()
  tuner = loop.Finetuner(model, objective, arrays, config, steps, init.get("encoder"),
                         frozen=frozen, head_params=init.get("head"))
  with _work_dir(options, name) as directory:
    chosen = selection.fit(tuner, arrays, steps, evaluate, metric, directory,
                           options.eval_each_epoch, tensorboard=bool(options.output_dir),
                           loss_curve=bool(options.output_dir),
                           resumable=bool(options.output_dir))
  report = {"train_rows": n, "train_steps": steps, "history": chosen.train_history,
            "train_time_s": time.time() - start, **chosen.report(), "eval": chosen.scores}
  if packed_report is not None:
    report["packing"] = {"train": packed_report}
  return tuner, chosen, report


def _packer(model: encoders.Encoder, kind: str, options: Options) -> packing.Packing:
  """How `model` runs `kind`: packed if options.packing and its family can (else why not)."""
  chosen = packing.Packing.choose(options.packing, model.family.name, model.config, kind,
                                  options.max_examples_per_row)
  if options.packing and not chosen.enabled:
    logging.warning("Running unpacked: %s.", chosen.reason)
  return chosen


def _predict(tuner: loop.Finetuner, packer: packing.Packing, arrays,
             output_keys: tuple[str, ...]) -> dict[str, np.ndarray]:
  """The tuner's outputs for every (unpacked) row of `arrays`, run packed when it packs."""
  return packer.predict(lambda rows, keys, untrim: tuner.predict(rows, keys, untrim=untrim),
                        arrays, output_keys)


def _fit_task(task: task_models.TaskModel, objective, arrays, options: Options,
              evaluate: selection.Evaluate, metric: str, what: str,
              packer: packing.Packing | None = None):
  """`_fit` of a task model; with an output_dir, the best epoch's model is saved there as a
  converted checkpoint of its transformers class (`what` says where it came from), the
  one copy of its weights: the selection's checkpoint is removed once it is written."""
  tuner, chosen, report = _fit(
      task.module, objective, arrays, task.start, options, evaluate, metric,
      banner=f"Fine-tuning {task.description} on {what} from {task.encoder.description}",
      packer=packer)
  report["model"] = task.description
  if options.output_dir:
    exported = task_models.save(task, tuner.params, options.output_dir,
                                task.encoder.tokenizer_dir,
                                f"{what}, fine-tuned from {task.encoder.description}")
    report["exported_as"] = exported
    if exported:
      shutil.rmtree(os.path.join(options.output_dir, checkpoints.RUN_SUBDIR))
  return tuner, chosen, report


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
          _predictions_path(options, "dev", f"{name}.tsv"), [e.guid for e in dev_sets[split]],
          glue_eval.submission_labels(task, chosen.outputs[split])))
    if options.predict_test:
      for split, name in zip(task.test_splits, task.submission_names):
        if not os.path.exists(task.path(split, options.data_dir)):
          continue
        examples = glue_eval.read_test_examples(task, split, skips, options.data_dir,
                                                options.max_eval_examples)
        logits = _predict(tuner, _packer(encoder, task_models.SEQUENCE, options),
                          convert(examples), ("logits",))["logits"]
        written.append(submission.write_glue(
            _predictions_path(options, "test", f"{name}.tsv"), [e.guid for e in examples],
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
  packer = _packer(encoder, task_models.SEQUENCE, options)

  def evaluate(tuner):
    scores, logits = {}, {}
    for split, (examples, arrays) in converted.items():
      start = time.time()
      logits[split] = _predict(tuner, packer, arrays, ("logits",))["logits"]
      scores[split] = {**glue_eval.evaluate(task, logits[split], arrays["labels"]),
                       "examples": len(examples), "eval_time_s": time.time() - start}
    return scores, logits

  objective = (objectives.Regression(task.label_center, task.label_scale) if task.is_regression
               else objectives.Classification())
  first_split = next(iter(dev_sets))
  tuner, chosen, report = _fit_task(model, objective, convert(train), options, evaluate,
                                    f"{first_split}/{task.metrics[0]}", task.name, packer)
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
        _predictions_path(options), answers, margins if version == "2.0" else None)
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
  packer = _packer(encoder, task_models.SPANS, options)

  def evaluate(tuner):
    start = time.time()
    logits = _predict(tuner, packer, {k: features[k] for k in model_keys[:3]},
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
  tuner, chosen, report = _fit_task(model, objectives.SpanExtraction(),
                                    {k: arrays[k] for k in model_keys}, options, evaluate,
                                    metric, what, packer)
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
  logits = _predict(tuner, packer, {k: arrays[k] for k in _NER_INPUTS}, ("logits",))["logits"]
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
    written.append(submission.write_conll(_predictions_path(options, "conll2003_dev.txt"),
                                          dev, chosen.outputs))
  test_path = conll.path("test", options.data_dir)
  if options.predict_test and os.path.exists(test_path):
    test = conll.read_sentences(test_path, skips)[:options.max_eval_examples]
    scores, tags = _ner_scores(tuner, test, convert(test), packer)
    report["eval"]["test"] = scores
    if options.output_dir:
      written.append(submission.write_conll(_predictions_path(options, "conll2003_test.txt"),
                                            test, tags))
  if written:
    report["predictions"] = written
  report["skipped"] = {"count": len(skips), "summary": skips.summary()}
  return report


def fit_tags(labels: tuple[str, ...], train: list[conll.Sentence], dev: list[conll.Sentence],
             encoder: encoders.Encoder, tokenizer: Tokenizer, options: Options, what: str):
  """Token classification over `labels` (entity tags: O, B-/I-/E-/S-<type>) fine-tuned on
  `train`, selected on `dev` by conlleval's entity F1: (finetuner, selection, report, the
  sentences -> inputs converter, how it packs). CoNLL-2003's files and your own (`finetune.own_data`) both
  come here; the selection's outputs are the best epoch's dev word tags."""
  model = task_models.build(encoder, task_models.TOKENS, labels, fresh_head=options.fresh_head)
  convert = lambda sentences: ner.convert_sentences(sentences, tokenizer,
                                                    options.max_seq_length, labels)
  train_arrays, dev_arrays = convert(train), convert(dev)
  packer = _packer(encoder, task_models.TOKENS, options)

  def evaluate(tuner):
    scores, tags = _ner_scores(tuner, dev, dev_arrays, packer, labels)
    return {"dev": scores}, tags

  tuner, chosen, report = _fit_task(model, objectives.TokenClassification(),
                                    {k: train_arrays[k] for k in _NER_TRAIN}, options, evaluate,
                                    "dev/f1", what, packer)
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
  packer = _packer(encoder, task_models.TOKENS, options)  # the encoder runs per token
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
    _, chosen, trained = _fit(tagger, feature_based.WordTagging(), word["train"], {}, options,
                              evaluate, "dev/f1", name=f"feature_{name}")
    scores = chosen.scores["dev"]
    logging.info("feature-based %s dev (best epoch): f1=%.4f", name, scores["f1"])
    report["eval"][name] = {**scores, "train_steps": trained["train_steps"],
                            "train_time_s": trained["train_time_s"],
                            "best_epoch": trained["best_epoch"], "epochs": trained["epochs"],
                            "time_s": time.time() - start}
    if options.output_dir:
      report["predictions"].append(submission.write_conll(
          _predictions_path(options, f"conll2003_dev_{name}.txt"), dev, chosen.outputs))
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

  _, chosen, report = _fit_task(model, objectives.Classification(), arrays, options, evaluate,
                                "val/accuracy", "SWAG",
                                _packer(encoder, task_models.CHOICES, options))
  if options.output_dir:
    report["predictions"] = [submission.write_swag(_predictions_path(options, "swag_val.csv"),
                                                   chosen.outputs)]
  report["skipped"] = {"count": len(skips), "summary": skips.summary()}
  return report
