r"""BERT-base's train step on one GPU: ours (f32, bf16; attention 'xla' and 'cudnn') next to
transformers' PyTorch model (f32, autocast bf16), with the GPU's measured bf16 matmul rate.

  python benchmarks/gpu_step.py                     # BERT-base, batch 32 x 512 (about 4 min)
  python benchmarks/gpu_step.py --tiny --steps=1    # the smoke test (any machine)

The step is side_by_side.py's (same AdamW, clipping, schedule, synthetic MLM + NSP batch,
MLM logits at every position as BertForPreTraining computes them), with hidden dropout
on and attention dropout 0 in every row: the fused kernels have no attention dropout,
so both sides run without it (torch's sdpa then uses its flash kernel). bf16 rows: ours
computes in bf16 with f32 parameters and optimizer (BertConfig.dtype); torch keeps f32
weights under `torch.autocast(bfloat16)`. f32 matmuls may use TF32 on both sides (JAX's
default precision; torch's allow_tf32 is switched on to match). MFU = model FLOPs/s
over the measured 8192^3 bf16 matmul rate. Writes the table to $OUT/gpu_step.md when
$OUT is set. Needs jax, flax, optax, torch, transformers and the pure-python gin-config.
"""
import argparse
import os
import statistics
import time

import jax
import jax.numpy as jnp
import torch
import transformers

from bertjax.models import bert
from bertjax.objectives import mlm, nsp
from bertjax.train import flops, optimizers, partitioning
import side_by_side
import step_timing


def matmul_rate(n: int, dtype, repeats: int = 10) -> float:
  a = jax.random.normal(jax.random.key(0), (n, n), dtype)
  b = jax.random.normal(jax.random.key(1), (n, n), dtype)
  matmul = jax.jit(jnp.dot)
  matmul(a, b).block_until_ready()
  start = time.perf_counter()
  for _ in range(repeats):
    out = matmul(a, b)
  out.block_until_ready()
  return 2 * n ** 3 * repeats / (time.perf_counter() - start)


def ours(config, batch, objective):
  tx, schedule = optimizers.make_optimizer(
      total_steps=side_by_side.TOTAL, schedule=lambda total_steps: optimizers.warmup_linear_decay(
          total_steps, peak_value=side_by_side.LR, warmup_steps=side_by_side.WARMUP))
  return step_timing.TrainStep(bert.BertForPreTraining(config), objective, tx, schedule, batch,
                               partitioning.make_mesh((-1, 1)), partitioning.axis_rules())


def theirs(config, batch, bf16: bool, device: str):
  model = side_by_side.hf_model("bert", config.replace(dtype="float32"), "BertForPreTraining")
  model.to(device)
  b = {k: torch.as_tensor(v, device=device) for k, v in batch.items()}
  b = {k: v.long() if not v.is_floating_point() else v for k, v in b.items()}

  def loss():
    with torch.autocast(device, dtype=torch.bfloat16, enabled=bf16):
      return model(input_ids=b["input_ids"], attention_mask=b["attention_mask"],
                   token_type_ids=b["token_type_ids"], labels=side_by_side.mlm_labels(b),
                   next_sentence_label=b["next_sentence_label"]).loss
  step = side_by_side.torch_trainer([model], loss)

  def run(n: int = 1):
    for _ in range(n):
      step()
    if device == "cuda":
      torch.cuda.synchronize()
  return run


def setup(args):
  """(config, batch, objective): BERT-base (or a tiny one) with `--config` changes and no
  attention dropout, a synthetic MLM + NSP batch, and the pretraining objective."""
  size = dict(hidden_size=32, num_layers=2, num_heads=2, intermediate_size=64,
              vocab_size=512) if args.tiny else {}
  changes = {name: type(getattr(bert.bert_base(), name))(value)
             for name, value in (c.split("=", 1) for c in args.config)}
  base = bert.bert_base().replace(**{"attention_dropout": 0.0, **size, **changes})
  batch = side_by_side.mlm_batch(args.batch_size, args.sequence_length, base.vocab_size)
  return base, batch, nsp.PretrainingObjective((mlm.MaskedLM(), nsp.SentencePair()))


def timed(run, steps: int) -> float:
  start = time.perf_counter()
  run(steps)
  return (time.perf_counter() - start) / steps


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--batch_size", type=int, default=32)
  parser.add_argument("--sequence_length", type=int, default=512)
  parser.add_argument("--steps", type=int, default=5, help="timed steps per round and side")
  parser.add_argument("--rounds", type=int, default=3)
  parser.add_argument("--tiny", action="store_true", help="a tiny model (smoke test)")
  parser.add_argument("--variants", default=None,
                      help="comma-separated compute:attention pairs (default: float32:xla, "
                      "bfloat16:xla and, on a GPU, bfloat16:cudnn)")
  parser.add_argument("--config", action="append", default=[],
                      help="NAME=VALUE changes to BERT-base's config on both sides (repeatable), "
                      "e.g. num_layers=1 to split a step's cost into per-layer and fixed parts")
  args = parser.parse_args(argv)
  torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = True
  gpu = jax.default_backend() == "gpu"
  device = "cuda" if torch.cuda.is_available() else "cpu"
  base, batch, objective = setup(args)
  peak = matmul_rate(256 if args.tiny else 8192, jnp.bfloat16)
  variants = ([tuple(v.split(":")) for v in args.variants.split(",")] if args.variants else
              [("float32", "xla"), ("bfloat16", "xla")] + ([("bfloat16", "cudnn")] if gpu else []))
  tokens = args.batch_size * args.sequence_length
  header = [f"{jax.devices()[0].device_kind}; jax {jax.__version__}, torch {torch.__version__}, "
            f"transformers {transformers.__version__}; BERT-base{' (tiny)' if args.tiny else ''} "
            f"MLM+NSP{''.join(f', {c}' for c in args.config)}, batch {args.batch_size} x "
            f"{args.sequence_length}, AdamW, hidden dropout {base.hidden_dropout}, attention "
            f"dropout 0; median of {args.rounds} rounds of {args.steps} steps",
            f"bf16 matmul {'256' if args.tiny else '8192'}^3: {peak / 1e12:.1f} TFLOP/s", "",
            "| compute | attention (ours) | compile s | ours tok/s | torch tok/s | ours MFU "
            "| torch MFU | ours / torch |", "|---|---|---|---|---|---|---|---|"]
  rows = []
  for dtype, attention in variants:
    # One variant failing (a kernel this GPU or JAX version lacks) still leaves the others.
    try:
      result = measure(base.replace(dtype=dtype, attention_implementation=attention), batch,
                       objective, device, args)
      t_ours, t_theirs, compile_s, step_flops = result
      rows.append(f"| {dtype} | {attention} | {compile_s:.1f} | {tokens / t_ours:.0f} "
                  f"| {tokens / t_theirs:.0f} | {step_flops / t_ours / peak:.1%} "
                  f"| {step_flops / t_theirs / peak:.1%} | {t_theirs / t_ours:.2f} |")
    except Exception as error:  # pylint: disable=broad-except
      rows.append(f"| {dtype} | {attention} | failed: {type(error).__name__}: "
                  f"{str(error).splitlines()[0][:200]} | | | | | |")
    table = "\n".join(header + rows) + "\n"
    print(rows[-1], flush=True)
    if os.environ.get("OUT"):
      with open(os.path.join(os.environ["OUT"], "gpu_step.md"), "w") as f:
        f.write(table)
  print(table)
  return table


def measure(config, batch, objective, device, args):
  """(ours s/step, torch s/step, our compile s, model FLOPs per step) for one variant."""
  mine = ours(config, batch, objective)
  start = time.perf_counter()
  mine.run()
  compile_s = time.perf_counter() - start
  inputs = objective.model_inputs({k: jnp.asarray(v) for k, v in batch.items()})
  params = jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), mine.params)
  model = bert.BertForPreTraining(config)
  step_flops = 3 * flops.dot_flops(lambda p: model.apply({"params": p}, **inputs), params)
  other = theirs(config, batch, config.dtype == "bfloat16", device)
  other(2)
  mine.run()
  t_ours, t_theirs = [], []
  for _ in range(args.rounds):
    t_ours.append(timed(mine.run, args.steps))
    t_theirs.append(timed(other, args.steps))
  return statistics.median(t_ours), statistics.median(t_theirs), compile_s, step_flops


if __name__ == "__main__":
  main()
