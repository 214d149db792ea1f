r"""Train-step throughput of BERT sizes, next to this machine's f32 matmul FLOP/s.

  python benchmarks/train_throughput.py                       # mini, small, base @ seq 128
  python benchmarks/train_throughput.py --sizes=tiny,mini --batch_size=16 --steps=5

For each size it times the real trainer step (MLM+NSP objective, AdamW, global-norm
clipping, donated state) on synthetic batches and reports tokens/s and model FLOPs/s
(`bertjax.train.flops`: 6 x matmul weights + tied vocab projection + attention, per token).
The practical ceiling is a large f32 matmul timed the same way; the ratio of the two
is the model FLOPs utilisation (MFU) against what this machine can actually do.
"""
import argparse
import time

import jax
import jax.numpy as jnp
import numpy as np

from bertjax.train import flops, optimizers, partitioning
import step_timing
from bertjax.models import bert
from bertjax.objectives import nsp


def matmul_flops_per_sec(n: int = 2048, repeats: int = 10) -> float:
  """Best-of-`repeats` FLOP/s of an n x n x n float32 matmul (2 n^3 FLOPs)."""
  a = jax.random.normal(jax.random.key(0), (n, n), jnp.float32)
  b = jax.random.normal(jax.random.key(1), (n, n), jnp.float32)
  matmul = jax.jit(jnp.dot)
  matmul(a, b).block_until_ready()
  best = float("inf")
  for _ in range(repeats):
    start = time.perf_counter()
    matmul(a, b).block_until_ready()
    best = min(best, time.perf_counter() - start)
  return 2 * n ** 3 / best


def synthetic_batch(batch_size: int, length: int, vocab_size: int, seed: int = 0) -> dict:
  rng = np.random.default_rng(seed)
  selected = rng.random((batch_size, length)) < 0.15
  return {
      "input_ids": rng.integers(5, vocab_size, (batch_size, length)).astype(np.int32),
      "attention_mask": np.ones((batch_size, length), np.int32),
      "token_type_ids": (np.arange(length)[None] >= length // 2).repeat(batch_size, 0).astype(np.int32),
      "mlm_targets": np.where(selected, rng.integers(5, vocab_size, (batch_size, length)), 0).astype(np.int32),
      "mlm_weights": selected.astype(np.float32),
      "next_sentence_label": rng.integers(0, 2, batch_size).astype(np.int32),
  }


def time_train_step(size: str, batch_size: int, length: int, steps: int, dtype: str) -> dict:
  """Tokens/s and model FLOPs/s of the trainer's step for one BERT size."""
  config = bert.SIZES[size](dtype=dtype)
  model = bert.BertForPreTraining(config)
  objective = nsp.bert_pretraining()
  mesh = partitioning.make_mesh((-1, 1))
  rules = partitioning.axis_rules()
  tx, schedule = optimizers.make_optimizer(total_steps=1000, optimizer=optimizers.adamw,
                                           schedule=optimizers.warmup_linear_decay)
  batch = synthetic_batch(batch_size, length, config.vocab_size)
  params, seconds, compile_s = step_timing.time_train_step(model, objective, tx, schedule, batch,
                                                          steps, mesh, rules)
  outputs = jax.eval_shape(lambda p: model.apply({"params": p}, **objective.model_inputs(batch)),
                           params)
  per_token = flops.for_model(model, params, length, outputs)
  tokens = batch_size * length / seconds
  return {"size": size, "params_M": sum(x.size for x in jax.tree.leaves(params)) / 1e6,
          "step_s": seconds, "compile_s": compile_s, "tokens_per_sec": tokens,
          "model_flops_per_sec": tokens * per_token, "gflops_per_token": per_token / 1e9}


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--sizes", default="mini,small,base")
  parser.add_argument("--batch_size", type=int, default=8)
  parser.add_argument("--sequence_length", type=int, default=128)
  parser.add_argument("--steps", type=int, default=3)
  parser.add_argument("--dtype", default="float32", help="compute dtype (params stay f32)")
  args = parser.parse_args()

  peak = matmul_flops_per_sec()
  print(f"{jax.device_count()} x {jax.devices()[0].device_kind}; f32 matmul (2048^3): "
        f"{peak / 1e9:.1f} GFLOP/s  <- practical limit")
  print(f"batch {args.batch_size} x seq {args.sequence_length}, compute {args.dtype}, "
        f"AdamW, MLM+NSP, vocab 30522")
  header = (f"{'model':<8}{'params':>9}{'step s':>9}{'compile s':>11}{'tokens/s':>11}"
            f"{'GFLOP/tok':>11}{'GFLOP/s':>10}{'/ matmul':>10}")
  print(header)
  print("-" * len(header))
  for size in args.sizes.split(","):
    r = time_train_step(size.strip(), args.batch_size, args.sequence_length, args.steps,
                        args.dtype)
    print(f"{'bert-' + r['size']:<8}{r['params_M']:>8.1f}M{r['step_s']:>9.3f}{r['compile_s']:>11.1f}"
          f"{r['tokens_per_sec']:>11.0f}{r['gflops_per_token']:>11.3f}"
          f"{r['model_flops_per_sec'] / 1e9:>10.1f}{r['model_flops_per_sec'] / peak:>10.1%}",
          flush=True)


if __name__ == "__main__":
  main()
