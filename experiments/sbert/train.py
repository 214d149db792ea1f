r"""SBERT Table 1 on one base encoder: pooled embeddings without training vs SBERT-trained.

  python experiments/sbert/train.py --checkpoint=DIR --stages=nli,stsb --out=/tmp/sbert

DIR is a converted checkpoint, a Hugging Face folder, or a `python -m bertjax.main`
model_dir (a BERT pretrained by bertjax; pass its vocabulary with --tokenizer).

Stages run in order, each continuing from the previous one's encoder:
  nli   SoftmaxLoss on SNLI pairs (3 classes, [u; v; |u - v|] head), 1 epoch
  stsb  CosineSimilarityLoss on STS-B train (gold / 5), 4 epochs
  mnrl  MultipleNegativesRankingLoss on SNLI (premise, entailment, contradiction) triplets
Before training, and after every stage, STS-B test (and SICK-R test) are scored as
Spearman x 100 of cosine similarity; `--eval_poolings` adds untrained [CLS] / max rows.
Hyper-parameters follow the SBERT paper: AdamW lr 2e-5, 10% linear warmup, batch 16,
mean pooling. Training uses the trainer engineer's train step and optimizer.
"""
import dataclasses
import functools
import json
import time

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
from absl import app, flags

from bertjax.sbert import encode, data as sbert_data, io as sbert_io
from bertjax.train import optimizers, step as train_step
from bertjax.evaluation import sts
from bertjax.checkpoints import encoders
from bertjax.checkpoints.formats import open_model
from bertjax.sbert import model as sbert
from bertjax.sbert import losses as siamese
from bertjax.train.state import TrainState

flags.DEFINE_string("checkpoint", None, "Base encoder: bertjax checkpoint, HF folder or run model_dir.",
                    required=True)
flags.DEFINE_string("tokenizer", None, "Tokenizer folder (vocab.txt / tokenizer.json); "
                    "default: the checkpoint's.")
flags.DEFINE_list("stages", ["nli", "stsb"], "Training stages, in order (nli, stsb, mnrl).")
flags.DEFINE_list("eval_poolings", ["mean", "cls", "max"], "Untrained poolings to score.")
flags.DEFINE_string("pooling", "mean", "Pooling used for training.")
flags.DEFINE_integer("batch_size", 16, "Examples per step.")
flags.DEFINE_float("learning_rate", 2e-5, "Peak AdamW learning rate.")
flags.DEFINE_integer("max_seq_length", 128, "Training truncation length.")
flags.DEFINE_float("nli_fraction", 1.0, "Fraction of the SNLI pairs to train on (for CPU runs).")
flags.DEFINE_integer("stsb_epochs", 4, "Epochs of the stsb stage (SBERT: 4).")
flags.DEFINE_integer("max_steps", 0, "Stop each stage after this many steps (0: its epochs); "
                     "the learning-rate schedule spans the steps actually run.")
flags.DEFINE_bool("sick", True, "Also score SICK-R test (9k sentences; slow on a busy CPU).")
flags.DEFINE_string("out", None, "Where to save the trained sentence model (encode-ready).")
flags.DEFINE_string("results", None, "Append one JSON line per score here.")
flags.DEFINE_integer("seed", 0, "Shuffling / dropout seed.")
FLAGS = flags.FLAGS

STAGES = {  # name -> (objective, epochs, classifier labels)
    "nli": (siamese.SoftmaxLoss(), 1, 3),
    "stsb": (siamese.CosineSimilarityLoss(), 4, 0),
    "mnrl": (siamese.MultipleNegativesRankingLoss(), 1, 0),
}


def stage_examples(name: str) -> sbert_data.Examples:
  if name == "stsb":
    return sbert_data.sts_examples(sts.read_stsbenchmark("train"))
  nli = sbert_data.read_senteval_nli("dev"), sbert_data.read_senteval_nli("test")
  pairs = sbert_data.Examples(nli[0].sentences + nli[1].sentences,
                              label=np.concatenate([nli[0].label, nli[1].label]))
  if FLAGS.nli_fraction < 1.0:
    keep = int(len(pairs) * FLAGS.nli_fraction)
    pairs = sbert_data.Examples(pairs.sentences[:keep], label=pairs.label[:keep])
  return sbert_data.nli_triplets(pairs) if name == "mnrl" else pairs


def train_stage(name, module, encoder_params, tokenizer, log):
  objective, epochs, num_labels = STAGES[name]
  epochs = FLAGS.stsb_epochs if name == "stsb" else epochs
  examples = stage_examples(name)
  model = sbert.SiameseModel(module, FLAGS.pooling, num_labels=num_labels)
  first = next(sbert_data.batches(examples, tokenizer, FLAGS.batch_size, FLAGS.max_seq_length))
  init = model.init(jax.random.PRNGKey(FLAGS.seed), **objective.model_inputs(first))
  params = dict(nn.unbox(init["params"]), encoder=encoder_params)
  steps = epochs * sbert_data.num_batches(examples, FLAGS.batch_size)
  if FLAGS.max_steps:
    steps = min(steps, FLAGS.max_steps)
  schedule = functools.partial(optimizers.warmup_linear_decay, peak_value=FLAGS.learning_rate,
                               warmup_steps=max(steps // 10, 1))
  tx, lr = optimizers.make_optimizer(steps, optimizer=optimizers.adamw, schedule=schedule)
  state = TrainState(step=jnp.zeros((), jnp.int32), params=params, opt_state=tx.init(params),
                     rng=jax.random.key_data(jax.random.key(FLAGS.seed)))
  step_fn = jax.jit(train_step.make_train_step(model, objective, tx, lr), donate_argnums=0)
  start, totals = time.time(), {}
  for epoch in range(epochs):
    for batch in sbert_data.batches(examples, tokenizer, FLAGS.batch_size, FLAGS.max_seq_length,
                                    seed=FLAGS.seed, epoch=epoch):
      if int(state.step) == steps:
        break
      state, metrics = step_fn(state, batch)
      for key, (total, count) in metrics.items():
        acc = totals.setdefault(key, [0.0, 0.0])
        acc[0], acc[1] = acc[0] + float(total), acc[1] + float(count)
      step = int(state.step)
      if step % 50 == 0 or step == steps:
        means = {k: float(f"{t / max(c, 1e-9):.4g}") for k, (t, c) in totals.items()}
        log(f"{name} step {step}/{steps} {means} {time.time() - start:.0f}s")
        totals = {}
  log(f"{name}: {len(examples)} examples, {epochs} epoch(s) capped at {steps} steps, in "
      f"{time.time() - start:.0f}s")
  return state.params["encoder"]


def score(row: str, module, encoder_params, tokenizer, pooling, log, results):
  encoder = encode.Encoder(module, encoder_params, tokenizer, pooling=pooling)
  start = time.time()
  scores = {"STSb": sts.evaluate_pairs(encoder.encode, sts.read_stsbenchmark("test"))}
  if FLAGS.sick:
    scores["SICK-R"] = sts.evaluate_pairs(encoder.encode, sts.read_sick("test"))
  log(f"{row}: " + ", ".join(f"{k} {v:.2f}" for k, v in scores.items()) +
      f" ({time.time() - start:.0f}s)")
  results.append({"row": row, **{k: round(v, 2) for k, v in scores.items()}})


def main(argv):
  del argv
  log = lambda msg: print(time.strftime("%H:%M:%S"), msg, flush=True)
  base = encoders.base_encoder(open_model(FLAGS.checkpoint, FLAGS.tokenizer))  # any source
  log(f"base encoder: {base.description}")
  tokenizer = sbert_io.load_tokenizer(base.tokenizer_dir)
  results = []
  for pooling in FLAGS.eval_poolings:
    score(f"untrained, {pooling} pooling", base.module, base.params, tokenizer, pooling, log,
          results)
  params, done = base.params, []
  for name in FLAGS.stages:
    params = train_stage(name, base.module, params, tokenizer, log)
    done.append(name)
    score(f"SBERT-{'+'.join(done)}, {FLAGS.pooling} pooling", base.module, params, tokenizer,
          FLAGS.pooling, log, results)
  if FLAGS.out and FLAGS.stages:
    trained = dataclasses.replace(base, params=params)
    sbert_io.save_sentence_model(FLAGS.out, trained, sbert_io.SentenceConfig(FLAGS.pooling),
                                 base.tokenizer_dir, source=base.description)
    log(f"saved to {FLAGS.out}")
  if FLAGS.results:
    with open(FLAGS.results, "a") as f:
      for r in results:
        f.write(json.dumps(dict(r, checkpoint=FLAGS.checkpoint, stages=FLAGS.stages)) + "\n")


if __name__ == "__main__":
  app.run(main)
