r"""Train-step throughput of XLNet (two streams + carried memory) on this machine.

  python benchmarks/xlnet_throughput.py                        # tiny and base @ seq 128
  python benchmarks/xlnet_throughput.py --sizes=tiny --batch_size=16 --steps=5

Times the real trainer step (`step_timing.time_train_step`: PermutationLM objective,
AdamW with the BERT schedule, donated state and memory, the memory fed from one step
to the next) on synthetic permutation-LM batches: P = L / 6 targets in a random
factorization order, memory of mem_len = L states per layer, reuse_len = L / 2.
Prints one line per size ending in tokens/s (input tokens per second, as the trainer
reports it).
"""
import argparse

import jax
import numpy as np

from bertjax.train import optimizers, partitioning
import step_timing
from bertjax.models import xlnet
from bertjax.objectives import plm


def synthetic_batch(batch_size: int, length: int, num_predict: int, vocab_size: int,
                    seed: int = 0) -> dict:
  """XLNet features (the data layer's layout) with a random order over the targets."""
  rng = np.random.default_rng(seed)
  perm_mask = np.zeros((batch_size, length, length), np.float32)
  target_mapping = np.zeros((batch_size, num_predict, length), np.float32)
  for row in range(batch_size):
    targets = np.sort(rng.choice(length, num_predict, replace=False))
    rank = np.zeros(length, np.int32)
    rank[targets] = 1 + rng.permutation(num_predict)
    perm_mask[row] = (rank[None, :] > 0) & (rank[None, :] >= rank[:, None])
    target_mapping[row, np.arange(num_predict), targets] = 1.0
  ids = rng.integers(5, vocab_size, (batch_size, length)).astype(np.int32)
  return {"input_ids": ids, "attention_mask": np.ones_like(ids),
          "token_type_ids": (np.arange(length)[None] >= length // 2).repeat(batch_size, 0)
                            .astype(np.int32),
          "perm_mask": perm_mask, "target_mapping": target_mapping,
          "target_ids": np.einsum("bpl,bl->bp", target_mapping, ids).astype(np.int32),
          "target_weights": np.ones((batch_size, num_predict), np.float32)}


def time_train_step(size: str, batch_size: int, length: int, steps: int, dtype: str) -> dict:
  config = xlnet.SIZES[size](dtype=dtype, mem_len=length, reuse_len=length // 2)
  model = xlnet.XLNetLMHeadModel(config)
  objective = plm.PermutationLM()
  tx, schedule = optimizers.make_optimizer(total_steps=1000, optimizer=optimizers.adamw,
                                           schedule=optimizers.warmup_linear_decay)
  batch = synthetic_batch(batch_size, length, max(1, length // 6), config.vocab_size)
  params, seconds, compile_s = step_timing.time_train_step(
      model, objective, tx, schedule, batch, steps, partitioning.make_mesh((-1, 1)),
      partitioning.axis_rules())
  return {"size": size, "params_M": sum(x.size for x in jax.tree.leaves(params)) / 1e6,
          "step_s": seconds, "compile_s": compile_s,
          "tokens_per_sec": batch_size * length / seconds}


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--sizes", default="tiny,base")
  parser.add_argument("--batch_size", type=int, default=8)
  parser.add_argument("--sequence_length", type=int, default=128)
  parser.add_argument("--steps", type=int, default=3)
  parser.add_argument("--dtype", default="float32", help="compute dtype (params stay f32)")
  args = parser.parse_args()
  print(f"{jax.device_count()} x {jax.devices()[0].device_kind}; batch {args.batch_size} x "
        f"seq {args.sequence_length} (+ memory {args.sequence_length}), compute {args.dtype}, "
        f"AdamW, permutation LM with {max(1, args.sequence_length // 6)} targets")
  for size in args.sizes.split(","):
    r = time_train_step(size.strip(), args.batch_size, args.sequence_length, args.steps,
                        args.dtype)
    print(f"train  xlnet-{r['size']:<6}{r['params_M']:>7.1f}M params  step {r['step_s']:.3f}s  "
          f"compile {r['compile_s']:.1f}s  {r['tokens_per_sec']:.0f} tokens/s", flush=True)


if __name__ == "__main__":
  main()
