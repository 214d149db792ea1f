r"""The train step, bertjax next to transformers' PyTorch model, on this machine.

  python benchmarks/side_by_side.py                        # every case below, batch 8 x 128
  python benchmarks/side_by_side.py --cases=bert-base,bert-base/mp20 --rounds=5

Both sides build the same model from one config (ours through the family's
`config_to_hf`), start from their own random weights, and train on the same synthetic
batch with dropout on, AdamW (b2 0.999, eps 1e-6, weight decay 0.01 except biases and
norm scales), global-norm clipping at 1.0 and a linear-warmup schedule. Ours is the
trainer's own step (bertjax.train.step, jitted, donated state); theirs is
zero_grad -> forward with labels -> backward -> clip -> AdamW -> scheduler, in train mode.

Cases: bert-mini and bert-base (MLM + NSP, BertForPreTraining), `/mp20` the same with
the MLM head at 20 masked positions (BERT's max_predictions_per_seq; the torch side
gathers those positions before its `cls` head too), roberta-base (MLM), electra-small
(generator + discriminator, replaced-token detection with lambda 50; transformers has no
joint class, so its side is ElectraForMaskedLM + ElectraForPreTraining sharing one
embedding module, sampling replacements by Gumbel-max as ours does; `/mp20` runs both
generators' heads and sampling at 20 selected positions, as ELECTRA's own code), t5-small
(span-corruption shapes: 128 input, 32 target tokens; tokens/s counts both). `/unroll`
runs our layer loop fully unrolled (scan_unroll = num_layers); the torch side is the same.

Timing: after a compile and a warm-up step each, the two sides alternate one step at
a time for `--rounds` rounds, each round also timing a 2048^3 f32 matmul in JAX and in
torch (each library's practical limit on this machine); medians are reported. Model FLOPs
are 3x the forward pass's matrix products (`bertjax.train.flops.dot_flops`), the same count
for both sides, so "% matmul" is each step's FLOP/s over its own library's matmul rate. The
ratio (ours / theirs tokens/s) is the last column; the last line compares the two matmuls,
a part of the ratio that no change to our step can move.
"""
import argparse
import dataclasses
import os
import re
import statistics
import time
from typing import Callable

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402

from bertjax.hf import registry  # noqa: E402
from bertjax.models import bert, electra, roberta, t5  # noqa: E402
from bertjax.objectives import mlm, nsp, rtd, seq2seq  # noqa: E402
from bertjax.train import flops, optimizers, partitioning, prng  # noqa: E402
import step_timing  # noqa: E402

LR, WARMUP, TOTAL = 1e-4, 100, 1000


@dataclasses.dataclass
class Case:
  model: object             # our module
  objective: object
  batch: dict               # numpy features
  tokens: int               # tokens per step
  torch_step: Callable[[dict], Callable[[], None]]  # torch batch -> one training step


# ----------------------------------------------------------------------------- torch side
def hf_model(family: str, config, architecture: str) -> torch.nn.Module:
  """transformers' `architecture` for our `config` (through the family's config.json mapping)."""
  values = registry.family_for(family).config_to_hf(config, architecture)
  values = {k: v for k, v in values.items() if k not in ("model_type", "architectures")}
  hf_config = transformers.AutoConfig.for_model(family, **values)
  return getattr(transformers, architecture)(hf_config).train()


def torch_trainer(modules: list, loss_fn: Callable[[], torch.Tensor]) -> Callable[[], None]:
  """One optimizer step of `loss_fn` over the parameters of `modules` (shared ones once)."""
  params = {id(p): (n, p) for m in modules for n, p in m.named_parameters()}.values()
  no_decay = lambda n: n.endswith("bias") or re.search(r"(LayerNorm|layer_norm)", n)
  groups = [{"params": [p for n, p in params if not no_decay(n)], "weight_decay": 0.01},
            {"params": [p for n, p in params if no_decay(n)], "weight_decay": 0.0}]
  opt = torch.optim.AdamW(groups, lr=LR, betas=(0.9, 0.999), eps=1e-6)
  sched = torch.optim.lr_scheduler.LambdaLR(
      opt, lambda s: min((s + 1) / WARMUP, max(0.0, (TOTAL - s) / (TOTAL - WARMUP))))
  all_params = [p for _, p in params]

  def step():
    opt.zero_grad(set_to_none=True)
    loss_fn().backward()
    torch.nn.utils.clip_grad_norm_(all_params, 1.0)
    opt.step()
    sched.step()
  return step


def mlm_labels(b: dict) -> torch.Tensor:
  return torch.where(b["mlm_weights"] > 0, b["mlm_targets"], torch.full_like(b["mlm_targets"], -100))


def torch_bert(config, max_predictions):
  def make(b):
    model = hf_model("bert", config, "BertForPreTraining")
    inputs = dict(input_ids=b["input_ids"], attention_mask=b["attention_mask"],
                  token_type_ids=b["token_type_ids"])
    if max_predictions is None:
      return torch_trainer([model], lambda: model(**inputs, labels=mlm_labels(b),
                                                  next_sentence_label=b["next_sentence_label"]).loss)
    k = min(max_predictions, b["mlm_weights"].shape[1])
    positions = torch.topk(b["mlm_weights"], k).indices  # as MaskedLM._positions
    labels = torch.gather(mlm_labels(b), 1, positions)

    def loss():
      hidden, pooled = model.bert(**inputs)[:2]
      hidden = torch.gather(hidden, 1, positions[..., None].expand(-1, -1, hidden.shape[-1]))
      scores, nsp_logits = model.cls(hidden, pooled)
      ce = torch.nn.functional.cross_entropy
      return ce(scores.flatten(0, 1), labels.flatten()) + ce(nsp_logits, b["next_sentence_label"])
    return torch_trainer([model], loss)
  return make


def torch_labelled(family: str, config, architecture: str, inputs: tuple, labels: Callable):
  """One model whose own `loss` (from `labels=`) is the objective: RoBERTa's MLM, T5."""
  def make(b):
    model = hf_model(family, config, architecture)
    return torch_trainer([model], lambda: model(**{k: b[k] for k in inputs}, labels=labels(b)).loss)
  return make


def torch_electra(config, max_predictions):
  """Generator MLM + 50 x detection, sampling by Gumbel-max; with `max_predictions` the
  generator's head and sampling run only at the selected positions, as ours."""
  def make(b):
    generator = hf_model("electra", config.generator_config(), "ElectraForMaskedLM")
    discriminator = hf_model("electra", config, "ElectraForPreTraining")
    discriminator.electra.embeddings = generator.electra.embeddings
    masked = b["mlm_weights"] > 0
    original = torch.where(masked, b["mlm_targets"], b["input_ids"])
    k = b["input_ids"].shape[1] if max_predictions is None else min(max_predictions,
                                                                    b["input_ids"].shape[1])
    positions = torch.topk(b["mlm_weights"], k).indices  # as mlm.masked_positions
    at = lambda x: torch.gather(x, 1, positions)
    labels = at(mlm_labels(b))

    def loss():
      hidden = generator.electra(input_ids=b["input_ids"], attention_mask=b["attention_mask"])[0]
      if max_predictions is not None:
        hidden = torch.gather(hidden, 1, positions[..., None].expand(-1, -1, hidden.shape[-1]))
      logits = generator.generator_lm_head(generator.generator_predictions(hidden))
      gen_loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), labels.flatten())
      noisy = logits.detach().float()
      noisy = noisy - torch.log(-torch.log(torch.rand_like(noisy).clamp_min(1e-20)))
      corrupted = original.scatter(1, positions, torch.where(at(masked), noisy.argmax(-1),
                                                             at(original)))
      disc = discriminator(input_ids=corrupted, attention_mask=b["attention_mask"],
                           labels=(corrupted != original).long())
      return gen_loss + 50.0 * disc.loss
    return torch_trainer([generator, discriminator], loss)
  return make


# ----------------------------------------------------------------------------- cases
def mlm_batch(batch_size: int, length: int, vocab: int, seed: int = 0) -> dict:
  """Full rows, 15% of positions selected for MLM (at least one per row), two segments."""
  rng = np.random.default_rng(seed)
  selected = rng.random((batch_size, length)) < 0.15
  selected[:, 1] = True
  ids = rng.integers(5, vocab, (batch_size, length)).astype(np.int32)
  return {"input_ids": np.where(selected, 4, ids), "attention_mask": np.ones_like(ids),
          "token_type_ids": (np.arange(length)[None] >= length // 2).repeat(batch_size, 0).astype(np.int32),
          "mlm_targets": np.where(selected, ids, 0).astype(np.int32),
          "mlm_weights": selected.astype(np.float32),
          "next_sentence_label": rng.integers(0, 2, batch_size).astype(np.int32)}


def t5_batch(batch_size: int, inputs_length: int, targets_length: int, vocab: int) -> dict:
  rng = np.random.default_rng(0)
  labels = rng.integers(3, vocab, (batch_size, targets_length)).astype(np.int32)
  return {"input_ids": rng.integers(3, vocab, (batch_size, inputs_length)).astype(np.int32),
          "attention_mask": np.ones((batch_size, inputs_length), np.int32),
          "decoder_input_ids": np.concatenate([np.zeros((batch_size, 1), np.int32),
                                               labels[:, :-1]], 1),
          "decoder_attention_mask": np.ones((batch_size, targets_length), np.int32),
          "labels": labels, "label_weights": np.ones((batch_size, targets_length), np.float32)}


def make_case(name: str, batch_size: int, length: int, overrides: dict) -> Case:
  """`name` is a model and its variants: `/mp<N>` (MLM head at N positions, BERT and
  ELECTRA), `/unroll` (our layer loop fully unrolled: scan_unroll = num_layers)."""
  kind, *variants = name.split("/")
  max_predictions = next((int(v[2:]) for v in variants if v.startswith("mp")), None)
  unknown = [v for v in variants if v != "unroll" and not v.startswith("mp")]
  if unknown or (max_predictions and not kind.startswith(("bert-", "electra-"))):
    raise ValueError(f"Unknown variant in {name!r}: bert-<size> and electra-small may add "
                     "/mp<N>; any encoder may add /unroll.")

  def sized(config):  # the case's default config with the overrides and variants applied
    config = config.replace(**overrides)
    return config.replace(scan_unroll=config.num_layers) if "unroll" in variants else config

  if kind.startswith("bert-"):
    config = sized(bert.SIZES[kind[5:]]())
    objective = nsp.PretrainingObjective((mlm.MaskedLM(max_predictions=max_predictions),
                                          nsp.SentencePair()))
    return Case(bert.BertForPreTraining(config), objective,
                mlm_batch(batch_size, length, config.vocab_size), batch_size * length,
                torch_bert(config, max_predictions))
  if kind == "roberta-base":
    config = sized(roberta.roberta_base())
    return Case(roberta.RobertaForMaskedLM(config), mlm.MaskedLM(logits_key="logits"),
                mlm_batch(batch_size, length, config.vocab_size), batch_size * length,
                torch_labelled("roberta", config, "RobertaForMaskedLM",
                               ("input_ids", "attention_mask"), mlm_labels))
  if kind == "electra-small":
    config = sized(electra.electra_small())
    return Case(electra.ElectraGeneratorDiscriminator(config),
                rtd.ReplacedTokenDetection(max_predictions=max_predictions),
                mlm_batch(batch_size, length, config.vocab_size), batch_size * length,
                torch_electra(config, max_predictions))
  if kind == "t5-small":
    config = sized(t5.t5_small())
    targets = max(2, length // 4)
    return Case(t5.T5ForConditionalGeneration(config), seq2seq.Seq2SeqLM(),
                t5_batch(batch_size, length, targets, config.vocab_size),
                batch_size * (length + targets),
                torch_labelled("t5", config, "T5ForConditionalGeneration",
                               ("input_ids", "attention_mask", "decoder_input_ids"),
                               lambda b: b["labels"]))
  raise ValueError(f"Unknown case {name!r}; use one of {CASES} or their variants.")


def tiny_overrides(name: str) -> dict:
  """Config changes that shrink case `name`'s model to a smoke-test size."""
  overrides = dict(hidden_size=32, num_layers=2, num_heads=2, intermediate_size=64,
                   vocab_size=512)
  return dict(overrides, num_decoder_layers=2, head_dim=16) if name.startswith("t5") else overrides


CASES = ("bert-mini", "bert-base", "bert-base/mp20", "roberta-base", "electra-small",
         "electra-small/mp20", "electra-small/mp20/unroll", "t5-small")


# ----------------------------------------------------------------------------- timing
def matmul_seconds(n: int):
  """A callable timing one n^3 f32 matmul in each library on the same operands, JAX's
  jitted, both warmed up: returns {'jax': seconds, 'torch': seconds}."""
  a, b = (np.random.default_rng(i).standard_normal((n, n), np.float32) for i in (0, 1))
  ja, jb, ta, tb = jnp.asarray(a), jnp.asarray(b), torch.from_numpy(a), torch.from_numpy(b)
  matmul = jax.jit(jnp.dot)
  matmul(ja, jb).block_until_ready()
  torch.mm(ta, tb)

  def run():
    start = time.perf_counter()
    matmul(ja, jb).block_until_ready()
    middle = time.perf_counter()
    torch.mm(ta, tb)
    return {"jax": middle - start, "torch": time.perf_counter() - middle}
  return run


def timed(fn) -> float:
  start = time.perf_counter()
  fn()
  return time.perf_counter() - start


def measure(case: Case, rounds: int, matmul) -> dict:
  mesh = partitioning.make_mesh((-1, 1))
  tx, schedule = optimizers.make_optimizer(
      total_steps=TOTAL, schedule=lambda total_steps: optimizers.warmup_linear_decay(
          total_steps, peak_value=LR, warmup_steps=WARMUP))
  ours = step_timing.TrainStep(case.model, case.objective, tx, schedule, case.batch, mesh,
                               partitioning.axis_rules())
  compile_s = timed(ours.run)
  inputs = case.objective.model_inputs({k: jnp.asarray(v) for k, v in case.batch.items()})
  params = jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), ours.params)
  model_flops = 3 * flops.dot_flops(lambda p: case.model.apply({"params": p}, **inputs), params)
  theirs = case.torch_step({k: torch.as_tensor(v).long() if v.dtype.kind in "iu"
                            else torch.as_tensor(v) for k, v in case.batch.items()})
  ours.run()
  theirs()
  times = {"ours": [], "theirs": [], "jax_matmul": [], "torch_matmul": []}
  for _ in range(rounds):
    for library, seconds in matmul().items():
      times[f"{library}_matmul"].append(seconds)
    times["ours"].append(timed(ours.run))
    times["theirs"].append(timed(theirs))
  med = {k: statistics.median(v) for k, v in times.items()}
  return {"compile_s": compile_s, "model_flops": model_flops, **med}


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--cases", default=",".join(CASES))
  parser.add_argument("--batch_size", type=int, default=8)
  parser.add_argument("--sequence_length", type=int, default=128)
  parser.add_argument("--rounds", type=int, default=3)
  parser.add_argument("--matmul_size", type=int, default=2048)
  parser.add_argument("--prng_impl", default="threefry2x32",
                      help="our dropout's generator (Trainer.prng_impl)")
  parser.add_argument("--tiny", action="store_true", help="shrink every model (smoke test)")
  parser.add_argument("--out", default=None, help="also write the table (markdown) here")
  args = parser.parse_args(argv)
  torch.manual_seed(0)
  prng.set_prng_impl(args.prng_impl)
  matmul = matmul_seconds(args.matmul_size)
  lines = [f"{jax.devices()[0].device_kind}, jax {jax.__version__}, torch {torch.__version__} "
           f"({torch.get_num_threads()} threads), transformers {transformers.__version__}; "
           f"batch {args.batch_size} x {args.sequence_length}, AdamW, dropout on ({args.prng_impl}), "
           f"median of {args.rounds} interleaved rounds",
           "",
           "| case | compile s | GFLOP/step | ours tok/s | torch tok/s | ours % matmul "
           "| torch % matmul | ours / torch |",
           "|---|---|---|---|---|---|---|---|"]
  print("\n".join(lines), flush=True)
  rates = {"jax": [], "torch": []}
  for name in args.cases.split(","):
    case = make_case(name.strip(), args.batch_size, args.sequence_length,
                     tiny_overrides(name) if args.tiny else {})
    r = measure(case, args.rounds, matmul)
    rate = {lib: 2 * args.matmul_size ** 3 / r[f"{lib}_matmul"] for lib in rates}
    for lib in rates:
      rates[lib].append(rate[lib])
    share = lambda s, lib: f"{r['model_flops'] / s / rate[lib]:.0%}"
    row = (f"| {name} | {r['compile_s']:.1f} | {r['model_flops'] / 1e9:.1f} "
           f"| {case.tokens / r['ours']:.0f} | {case.tokens / r['theirs']:.0f} "
           f"| {share(r['ours'], 'jax')} | {share(r['theirs'], 'torch')} "
           f"| {r['theirs'] / r['ours']:.2f} |")
    lines.append(row)
    print(row, flush=True)
  jax_rate, torch_rate = (statistics.median(rates[lib]) for lib in ("jax", "torch"))
  tail = (f"\nf32 matmul {args.matmul_size}^3 (median over the rounds): JAX "
          f"{jax_rate / 1e9:.0f} GFLOP/s, torch {torch_rate / 1e9:.0f} GFLOP/s "
          f"(JAX / torch {jax_rate / torch_rate:.2f})")
  lines.append(tail)
  print(tail)
  if args.out:
    with open(args.out, "w") as f:
      f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
  main()
