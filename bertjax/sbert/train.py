r"""SBERT Table 1 on one base encoder: pooled embeddings without training vs SBERT-trained.

  python -m bertjax.sbert.train --checkpoint=DIR --stages=nli,stsb --out=/tmp/sbert

DIR is a converted checkpoint, a Hugging Face folder, or a `python -m bertjax.main`
model_dir (a BERT pretrained by bertjax; pass its vocabulary with --tokenizer).

Stages run in order, each continuing from the previous one's encoder:
  nli   SoftmaxLoss on SNLI pairs (3 classes, [u; v; |u - v|] head), 1 epoch
  stsb  CosineSimilarityLoss on STS-B train (gold / 5), 4 epochs
  mnrl  MultipleNegativesRankingLoss on SNLI (premise, entailment, contradiction) triplets
Before training, and after every stage, STS-B test (and SICK-R test) are scored as
Spearman x 100 of cosine similarity; `--eval_poolings` adds untrained [CLS] / max rows
(`--max_eval_pairs=N` scores only the first N pairs of each set, for quick runs).
Hyper-parameters follow the SBERT paper: AdamW lr 2e-5, 10% linear warmup, batch 16,
mean pooling. Training runs the trainer's setup, step and loop (`bertjax.train.setup`,
`.step`, `.loop`): data parallel over as many devices as split each microbatch, the
state laid out by the trainer's axis rules, gradient accumulation (--num_microbatches;
in-batch negatives then come from each microbatch), the non-finite guard
(--on_nonfinite), and metric rows (loss, learning_rate, grad_norm, nonfinite,
packing_efficiency, the loss's own) every --log_every steps on the console and, with
--metrics_dir, in METRICS_DIR/<stage>/metrics.jsonl and TensorBoard. A batch's sentences
are packed end to end into rows of --max_seq_length (sbert.data.packed_batches), so
the encoder computes on real tokens only; --nopacking gives each sentence its own padded
row (an encoder family that cannot pack trains so, saying why).
"""
import dataclasses
import json
import os
import time
from typing import Callable, Iterator

import flax.linen as nn
import numpy as np

from bertjax import output_paths
from bertjax.checkpoints import encoders
from bertjax.checkpoints.formats import open_model
from bertjax.evaluation import sts
from bertjax.finetune import packing
from bertjax.sbert import data as sbert_data, encode, io as sbert_io
from bertjax.sbert import losses as siamese, model as sbert
from bertjax.train import loop as train_loop, metrics as train_metrics, optimizers, partitioning
from bertjax.train import setup as train_setup

STAGES = {  # name -> (objective, epochs, classifier labels)
    "nli": (siamese.SoftmaxLoss(), 1, 3),
    "stsb": (siamese.CosineSimilarityLoss(), 4, 0),
    "mnrl": (siamese.MultipleNegativesRankingLoss(), 1, 0),
}


@dataclasses.dataclass(frozen=True)
class TrainConfig:
  """How every stage trains (the CLI's flags of the same names)."""
  pooling: str = "mean"
  batch_size: int = 16
  learning_rate: float = 2e-5
  max_seq_length: int = 128
  max_steps: int = 0             # cap each stage at this many steps (0: its epochs)
  seed: int = 0
  num_microbatches: int = 1
  on_nonfinite: str = "stop"
  log_every: int = 50
  packing: bool = True           # sentences end to end in rows (sbert.data.packed_batches)

  def __post_init__(self):
    if self.num_microbatches < 1 or self.batch_size % self.num_microbatches:
      raise ValueError(f"--num_microbatches={self.num_microbatches}: must be >= 1 and divide "
                       f"--batch_size={self.batch_size}.")
    if self.on_nonfinite not in train_loop.NONFINITE_MODES:
      raise ValueError(f"--on_nonfinite={self.on_nonfinite!r}: use one of "
                       f"{train_loop.NONFINITE_MODES}.")


def stage_examples(name: str, nli_fraction: float = 1.0) -> sbert_data.Examples:
  if name == "stsb":
    return sbert_data.sts_examples(sts.read_stsbenchmark("train"))
  nli = sbert_data.read_senteval_nli("dev"), sbert_data.read_senteval_nli("test")
  pairs = sbert_data.Examples(nli[0].sentences + nli[1].sentences,
                              label=np.concatenate([nli[0].label, nli[1].label]))
  if nli_fraction < 1.0:
    keep = int(len(pairs) * nli_fraction)
    pairs = sbert_data.Examples(pairs.sentences[:keep], label=pairs.label[:keep])
  return sbert_data.nli_triplets(pairs) if name == "mnrl" else pairs


def _batches(examples, tokenizer, config: TrainConfig, row_multiple: int, epoch: int = 0
             ) -> Iterator[dict]:
  """One epoch's batches: packed rows (`row_multiple`: the devices that split a batch's
  rows) with config.packing, else a padded row per sentence."""
  if config.packing:
    return sbert_data.packed_batches(
        examples, tokenizer, config.batch_size, config.max_seq_length,
        sbert.SENTENCES_PER_ROW, config.num_microbatches, row_multiple,
        seed=config.seed, epoch=epoch)
  return sbert_data.batches(examples, tokenizer, config.batch_size, config.max_seq_length,
                            seed=config.seed, epoch=epoch)


def _epochs_of_batches(examples, tokenizer, config: TrainConfig, row_multiple: int,
                       epochs: int) -> Iterator[dict]:
  for epoch in range(epochs):
    yield from _batches(examples, tokenizer, config, row_multiple, epoch)


def train_stage(name: str, objective, examples: sbert_data.Examples, epochs: int,
                num_labels: int, module: nn.Module, encoder_params, tokenizer,
                config: TrainConfig, log: Callable[[str], None],
                metrics_dir: str | None = None, mesh=None):
  """Trains a SiameseModel over `module` for `epochs` (capped at config.max_steps) on the
  shared loop, sharded over `mesh` (default: data parallel over the devices that split a
  microbatch); returns the trained encoder params (on that mesh)."""
  model = sbert.SiameseModel(module, config.pooling, num_labels=num_labels)
  steps = epochs * sbert_data.num_batches(examples, config.batch_size)
  if config.max_steps:
    steps = min(steps, config.max_steps)
  optimizer = optimizers.adamw_linear(steps, config.learning_rate, max(steps // 10, 1))
  mesh = mesh or train_setup.data_parallel_mesh(config.batch_size // config.num_microbatches)
  row_multiple = partitioning.batch_devices(mesh, partitioning.DEFAULT_RULES)
  first = next(_batches(examples, tokenizer, config, row_multiple))
  setup = train_setup.build(model, first, objective.model_inputs, optimizer, mesh,
                            partitioning.DEFAULT_RULES)
  params = dict(setup.init_params(config.seed), encoder=encoder_params)
  state = setup.new_state(config.seed, params)
  step_fn = setup.jit_train_step(model, objective, config.num_microbatches)
  writer = train_metrics.MetricsWriter(metrics_dir, steps, show_progress=False)
  runner = train_loop.TrainLoop(
      step_fn, writer, config.log_every, tokens=lambda batch: batch["attention_mask"].size,
      on_nonfinite=config.on_nonfinite, log=lambda row: log(f"{name} {row}"),
      advice=lambda: (f"lower --learning_rate (now {config.learning_rate:g}), check the data, "
                      f"or pass --on_nonfinite=skip to drop such updates."),
      data_name=f"The {name} examples")
  start = time.time()
  try:
    state, _, _ = runner.run(
        state, _epochs_of_batches(examples, tokenizer, config, row_multiple, epochs), 0, steps)
  finally:
    writer.close()
  log(f"{name}: {len(examples)} examples, {epochs} epoch(s) capped at {steps} steps, in "
      f"{time.time() - start:.0f}s")
  return state.params["encoder"]


def first_pairs(pairs: sts.StsPairs, max_pairs: int) -> sts.StsPairs:
  """The first `max_pairs` pairs (0: all), for quick checks of the pipeline."""
  if not max_pairs or max_pairs >= len(pairs):
    return pairs
  return sts.StsPairs(f"{pairs.name} (first {max_pairs})", pairs.sentences1[:max_pairs],
                      pairs.sentences2[:max_pairs], pairs.scores[:max_pairs])


def score(row: str, module, encoder_params, tokenizer, pooling: str, sick: bool, log,
          results: list, max_pairs: int = 0) -> None:
  encoder = encode.Encoder(module, encoder_params, tokenizer, pooling=pooling)
  start = time.time()
  sets = {"STSb": sts.read_stsbenchmark("test")}
  if sick:
    sets["SICK-R"] = sts.read_sick("test")
  scores = {name: sts.evaluate_pairs(encoder.encode, first_pairs(pairs, max_pairs))
            for name, pairs in sets.items()}
  log(f"{row}: " + ", ".join(f"{k} {v:.2f}" for k, v in scores.items()) +
      f" ({time.time() - start:.0f}s)")
  results.append({"row": row, **{k: round(v, 2) for k, v in scores.items()}})


def main(argv) -> None:
  from absl import flags  # Local: the library functions above do not need absl.
  FLAGS = flags.FLAGS
  if len(argv) > 1:
    raise ValueError(f"Unexpected arguments {argv[1:]}; see --help.")
  unknown = [s for s in FLAGS.stages if s not in STAGES]
  if unknown:
    raise ValueError(f"--stages: unknown {unknown}; use some of {sorted(STAGES)}.")
  config = TrainConfig(**{f.name: FLAGS[f.name].value for f in dataclasses.fields(TrainConfig)})
  if FLAGS.out and FLAGS.stages:
    output_paths.claim_folder(FLAGS.out, "--out", FLAGS.overwrite,
                              reads=[FLAGS.checkpoint, FLAGS.tokenizer])
  log = lambda msg: print(time.strftime("%H:%M:%S"), msg, flush=True)
  base = encoders.base_encoder(open_model(FLAGS.checkpoint, FLAGS.tokenizer))  # any source
  log(f"base encoder: {base.description}")
  tokenizer = sbert_io.load_tokenizer(base.tokenizer_dir)
  if config.packing:
    reason = packing.refusal(base.family.name, base.config, packing.SEQUENCE)
    if reason:
      log(f"training unpacked: {reason}")
      config = dataclasses.replace(config, packing=False)
  results = []
  if FLAGS.max_eval_pairs < 0:
    raise ValueError(f"--max_eval_pairs={FLAGS.max_eval_pairs}: use 0 (all pairs) or more.")
  for pooling in FLAGS.eval_poolings:
    score(f"untrained, {pooling} pooling", base.module, base.params, tokenizer, pooling,
          FLAGS.sick, log, results, FLAGS.max_eval_pairs)
  params, done = base.params, []
  for name in FLAGS.stages:
    objective, epochs, num_labels = STAGES[name]
    epochs = FLAGS.stsb_epochs if name == "stsb" else epochs
    params = train_stage(name, objective, stage_examples(name, FLAGS.nli_fraction), epochs,
                         num_labels, base.module, params, tokenizer, config, log,
                         os.path.join(FLAGS.metrics_dir, name) if FLAGS.metrics_dir else None)
    done.append(name)
    score(f"SBERT-{'+'.join(done)}, {FLAGS.pooling} pooling", base.module, params, tokenizer,
          FLAGS.pooling, FLAGS.sick, log, results, FLAGS.max_eval_pairs)
  if FLAGS.out and FLAGS.stages:
    trained = dataclasses.replace(base, params=params)
    sbert_io.save_sentence_model(FLAGS.out, trained, sbert_io.SentenceConfig(FLAGS.pooling),
                                 base.tokenizer_dir, source=base.description)
    log(f"saved to {FLAGS.out}")
  if FLAGS.results:
    with open(FLAGS.results, "a") as f:
      for r in results:
        f.write(json.dumps(dict(r, checkpoint=FLAGS.checkpoint, stages=FLAGS.stages)) + "\n")


def _define_flags() -> None:
  from absl import flags
  flags.DEFINE_string("checkpoint", None,
                      "Base encoder: bertjax checkpoint, HF folder or run model_dir.",
                      required=True)
  flags.DEFINE_string("tokenizer", None, "Tokenizer folder (vocab.txt / tokenizer.json); "
                      "default: the checkpoint's.")
  flags.DEFINE_list("stages", ["nli", "stsb"], "Training stages, in order (nli, stsb, mnrl).")
  flags.DEFINE_list("eval_poolings", ["mean", "cls", "max"], "Untrained poolings to score.")
  flags.DEFINE_string("pooling", "mean", "Pooling used for training.")
  flags.DEFINE_integer("batch_size", 16, "Examples per step.")
  flags.DEFINE_float("learning_rate", 2e-5, "Peak AdamW learning rate.")
  flags.DEFINE_integer("max_seq_length", 128, "Training truncation length.")
  flags.DEFINE_float("nli_fraction", 1.0,
                     "Fraction of the SNLI pairs to train on (for CPU runs).")
  flags.DEFINE_integer("stsb_epochs", 4, "Epochs of the stsb stage (SBERT: 4).")
  flags.DEFINE_integer("max_steps", 0, "Stop each stage after this many steps (0: its "
                       "epochs); the learning-rate schedule spans the steps actually run.")
  flags.DEFINE_bool("sick", True, "Also score SICK-R test (9k sentences; slow on a busy CPU).")
  flags.DEFINE_integer("max_eval_pairs", 0, "Score only the first N pairs of each test set "
                       "(0: all; for quick runs, not for reported numbers).")
  flags.DEFINE_string("out", None, "Where to save the trained sentence model (encode-ready).")
  flags.DEFINE_bool("overwrite", False, "Replace an existing --out folder.")
  flags.DEFINE_alias("output_dir", "out")
  flags.DEFINE_string("results", None, "Append one JSON line per score here.")
  flags.DEFINE_integer("seed", 0, "Shuffling / dropout seed.")
  flags.DEFINE_integer("num_microbatches", 1, "Gradient accumulation: passes per step, each "
                       "over batch_size / N examples (in-batch negatives come from each pass).")
  flags.DEFINE_enum("on_nonfinite", "stop", list(train_loop.NONFINITE_MODES),
                    "A NaN/Inf loss or gradient: stop with an error, or skip that update.")
  flags.DEFINE_integer("log_every", 50, "Steps between training metric rows.")
  flags.DEFINE_bool("packing", True, "Lay a batch's sentences end to end in rows of "
                    "--max_seq_length (no compute on padding); --nopacking: one padded row "
                    "per sentence.")
  flags.DEFINE_string("metrics_dir", None, "Training metrics (metrics.jsonl, TensorBoard) under "
                      "METRICS_DIR/<stage>/; default: the console only.")


def run() -> None:
  """`bertjax sbert` / `python -m bertjax.sbert.train`."""
  from bertjax import cli  # Local: the library functions above do not need absl.
  _define_flags()
  cli.run(main, __doc__)


if __name__ == "__main__":
  run()
