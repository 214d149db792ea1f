r"""Train-step throughput (tokens/s) of each encoder family at one small size, on one device.

  python benchmarks/encoder_family_throughput.py                  # every model
  python benchmarks/encoder_family_throughput.py roberta albert   # some of them
  python benchmarks/encoder_family_throughput.py --batch 16 --length 128 --steps 10

Each entry of `BUILDERS` returns the module, its pretraining objective and the extra
batch features that objective reads; the step is the trainer's own
(bertjax.train.step.make_train_step: forward, loss, backward, AdamW update), jitted
for one device. Compilation and the first step are not timed. All models share the
"mini" width (4 layers, hidden 256, 4 heads, MLP 1024) and a 30,522-id vocabulary, so
the numbers compare architectures, not sizes. Add a family with one `BUILDERS` line.

A family that names its bare encoder (`Bench.encoder`) also gets an encode column: the
jitted, deterministic forward pass to the last hidden state on the same rows (tokens/s),
what `bertjax.inference` runs to embed text. Families are timed one after another, so
compare rows of one run (`--repeats` takes the median of several).
"""
import argparse
import dataclasses
import os
import statistics
import time
from typing import Callable

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import flax.linen as nn  # noqa: E402
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from bertjax.train import optimizers, state as train_state, step as train_step  # noqa: E402
from bertjax.models import albert, bert, distilbert, roberta, spanbert
from bertjax.models.common import distillation  # noqa: E402
from bertjax.models import deberta, electra, modernbert  # noqa: E402
from bertjax.objectives import distill, mlm, nsp, rtd, sbo  # noqa: E402

VOCAB = 30522
SMALL = dict(vocab_size=VOCAB, hidden_size=256, num_layers=4, num_heads=4, intermediate_size=1024,
             hidden_dropout=0.1, attention_dropout=0.1)


@dataclasses.dataclass
class Bench:
  model: object
  objective: object
  features: tuple[str, ...] = ()  # extra batch features beyond MLM's
  frozen: tuple[str, ...] = ()    # param path regexes the optimizer leaves alone
  encoder: object = None          # the bare encoder (input_ids, attention_mask -> hidden)


def _roberta() -> Bench:
  cfg = roberta.RobertaConfig(**SMALL, max_position_embeddings=514)
  return Bench(roberta.RobertaForMaskedLM(cfg), mlm.MaskedLM(logits_key="logits"))


def _albert() -> Bench:
  cfg = albert.AlbertConfig(**SMALL, embedding_size=128)
  return Bench(albert.AlbertForPreTraining(cfg),
               nsp.PretrainingObjective((mlm.MaskedLM(), nsp.SentencePair(
                   name="sop", logits_key="sop_logits"))), ("next_sentence_label",))


def _spanbert() -> Bench:
  cfg = spanbert.SpanBertConfig(**SMALL)
  return Bench(spanbert.SpanBertForPreTraining(cfg), sbo.spanbert_pretraining(),
               ("sbo_left", "sbo_right", "sbo_pos"))


def _distilbert() -> Bench:
  teacher = bert.BertConfig(**{**SMALL, "num_layers": 8})
  student = distilbert.student_config(teacher)
  model = distillation.StudentTeacher(distilbert.DistilBertForMaskedLM(student),
                                      bert.BertForMaskedLM(teacher),
                                      teacher_outputs=("logits", "last_hidden_state"))
  return Bench(model, distill.DistilBertLoss(), frozen=("^teacher/",))


def _electra() -> Bench:
  cfg = electra.ElectraConfig(**SMALL, embedding_size=128, generator_fraction=0.25)
  return Bench(electra.ElectraGeneratorDiscriminator(cfg), rtd.ReplacedTokenDetection())


def _deberta(version: int) -> Callable[[], Bench]:
  def build() -> Bench:
    size = deberta.deberta_base if version == 1 else deberta.deberta_v3_base
    return Bench(deberta.DebertaForMaskedLM(size(**SMALL)), mlm.MaskedLM(logits_key="logits"))
  return build


def _modernbert() -> Bench:
  # Its published layout at this width: every 3rd layer global, the others a 128-token
  # window; GeGLU of 683 (3 x 256 x 683 weights, BERT's MLP has 2 x 256 x 1024).
  cfg = modernbert.ModernBertConfig(**{**SMALL, "intermediate_size": 683}, pad_token_id=0,
                                    cls_token_id=101, sep_token_id=102)
  return Bench(modernbert.ModernBertForMaskedLM(cfg), mlm.MaskedLM(),
               encoder=modernbert.ModernBertModel(cfg))


def _bert() -> Bench:
  cfg = bert.BertConfig(**SMALL)
  return Bench(bert.BertForPreTraining(cfg), nsp.bert_pretraining("nsp"),
               ("next_sentence_label",), encoder=bert.BertModel(cfg))


# name -> builder. Other families add their line here.
BUILDERS: dict[str, Callable[[], Bench]] = {
    "bert": _bert,
    "roberta": _roberta,
    "albert": _albert,
    "distilbert (student 4L + frozen 8L teacher)": _distilbert,
    "spanbert": _spanbert,
    "electra (disc. + 1/4-width generator, RTD)": _electra,
    "deberta-v1 (c2p+p2c, 512 rel. positions)": _deberta(1),
    "deberta-v3 (256 log buckets, shared keys)": _deberta(2),
    "modernbert (rotary, GeGLU, 1 in 3 layers global)": _modernbert,
}


def synthetic_batch(batch: int, length: int, features: tuple[str, ...], seed: int = 0) -> dict:
  """Full-length rows, 15% of positions selected for MLM in spans of 3 (for SBO)."""
  rng = np.random.default_rng(seed)
  ids = rng.integers(5, VOCAB, (batch, length)).astype(np.int32)
  starts = np.arange(1, length - 4, 20)
  selected = np.zeros((batch, length), bool)
  left = np.zeros((batch, length), np.int32)
  for s in starts:
    selected[:, s:s + 3] = True
    left[:, s:s + 3] = s - 1
  out = {"input_ids": np.where(selected, 4, ids), "attention_mask": np.ones_like(ids),
         "token_type_ids": np.zeros_like(ids), "mlm_targets": np.where(selected, ids, 0),
         "mlm_weights": selected.astype(np.float32)}
  extra = {"next_sentence_label": rng.integers(0, 2, batch).astype(np.int32),
           "sbo_left": left, "sbo_right": np.where(selected, left + 4, 0).astype(np.int32),
           "sbo_pos": np.where(selected, np.arange(length)[None] - left, 0).astype(np.int32)}
  out.update({k: extra[k] for k in features})
  return {k: jnp.asarray(v) for k, v in out.items()}


class Timed:
  """One family's compiled train step (and encoder forward, if it names one), timed in
  rounds: `main` interleaves the families' rounds so that load from other processes on a
  shared machine falls on all of them alike."""

  def __init__(self, bench: Bench, batch_size: int, length: int):
    self.tokens = batch_size * length
    batch = synthetic_batch(batch_size, length, bench.features)
    tx, schedule = optimizers.make_optimizer(total_steps=1000, schedule=optimizers.constant,
                                             frozen=bench.frozen)
    init = train_state.init_params_fn(bench.model, batch, bench.objective.model_inputs)
    params = jax.jit(lambda k: nn.unbox(init(k)))(jax.random.key(0))
    self.params = sum(x.size for x in jax.tree.leaves(params))
    state = train_state.TrainState(step=jnp.zeros((), jnp.int32), params=params,
                                   opt_state=tx.init(params),
                                   rng=jax.random.key_data(jax.random.key(1)))
    step = jax.jit(train_step.make_train_step(bench.model, bench.objective, tx, schedule),
                   donate_argnums=(0,))
    self.state, metrics = step(state, batch)  # compile + first step
    jax.block_until_ready(metrics)
    self._step, self._batch = step, batch
    self._encode = None
    if bench.encoder is not None:
      ids, mask = batch["input_ids"], batch["attention_mask"]
      encoder_params = jax.jit(lambda k: nn.unbox(bench.encoder.init(k, ids, mask)))(
          jax.random.key(0))
      forward = jax.jit(lambda p: bench.encoder.apply(p, ids, mask)["last_hidden_state"])
      jax.block_until_ready(forward(encoder_params))  # compile
      self._encode = lambda: forward(encoder_params)

  def train_seconds(self, steps: int) -> float:
    start = time.perf_counter()
    for _ in range(steps):
      self.state, metrics = self._step(self.state, self._batch)
    jax.block_until_ready(metrics)
    return (time.perf_counter() - start) / steps

  def encode_seconds(self, steps: int) -> float | None:
    if self._encode is None:
      return None
    start = time.perf_counter()
    for _ in range(steps):
      hidden = self._encode()
    jax.block_until_ready(hidden)
    return (time.perf_counter() - start) / steps


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("models", nargs="*", help=f"subset of {sorted(BUILDERS)} (prefixes ok)")
  parser.add_argument("--batch", type=int, default=8)
  parser.add_argument("--length", type=int, default=128)
  parser.add_argument("--steps", type=int, default=5)
  parser.add_argument("--repeats", type=int, default=3,
                      help="timed rounds, interleaved across families; the median is shown")
  args = parser.parse_args(argv)
  names = [n for n in BUILDERS if not args.models or any(n.startswith(m) for m in args.models)]
  if not names:
    parser.error(f"no model matches {args.models}; known: {sorted(BUILDERS)}")
  print(f"device: {jax.devices()[0].device_kind}, batch {args.batch} x {args.length} tokens, "
        f"mini width (L4 H256 A4 F1024), vocab {VOCAB}, median of {args.repeats} rounds")
  timed = {name: Timed(BUILDERS[name](), args.batch, args.length) for name in names}
  train = {name: [] for name in names}
  encode = {name: [] for name in names}
  for _ in range(args.repeats):
    for name, t in timed.items():
      train[name].append(t.train_seconds(args.steps))
      encode[name].append(t.encode_seconds(args.steps))
  print(f"{'':50s} {'train tokens/s':>14s} {'ms/step':>8s} {'params':>7s} "
        f"{'encode tokens/s':>15s}")
  for name, t in timed.items():
    seconds = statistics.median(train[name])
    encode_rate = ("-" if encode[name][0] is None
                   else f"{t.tokens / statistics.median(encode[name]):.0f}")
    print(f"{name:50s} {t.tokens / seconds:14.0f} {1e3 * seconds:8.1f} "
          f"{t.params / 1e6:6.1f}M {encode_rate:>15s}", flush=True)


if __name__ == "__main__":
  main()
