r"""Train-step throughput of XLNet (two streams + carried memory) on this machine.

  python benchmarks/xlnet_throughput.py                        # tiny and base @ seq 128
  python benchmarks/xlnet_throughput.py --sizes=tiny --batch_size=16 --steps=5

Times the real trainer step (`bertjax.train_step`: PermutationLM objective, AdamW with
the BERT schedule, donated state, memory fed from one step to the next) on synthetic
permutation-LM batches: P = L / 6 targets in a random factorization order, memory of
mem_len = L states per layer, reuse_len = L / 2. Prints one line per size with
tokens/s (input tokens per second, as the trainer reports it).
"""
import argparse
import time

import jax
import numpy as np

from bertjax import optimizers, partitioning, train_state, train_step
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
  mesh = partitioning.make_mesh((-1, 1))
  rules = partitioning.axis_rules()
  tx, schedule = optimizers.make_optimizer(total_steps=1000, optimizer=optimizers.adamw,
                                           schedule=optimizers.warmup_linear_decay)
  batch = synthetic_batch(batch_size, length, max(1, length // 6), config.vocab_size)
  init_fn = train_state.init_params_fn(model, {k: v[:1] for k, v in batch.items()},
                                       objective.model_inputs)
  abstract, shardings = train_state.state_shardings(jax.eval_shape(init_fn, jax.random.key(0)),
                                                    tx, mesh, rules)
  state = train_state.create_state(init_fn, tx, 0, shardings)
  batch_sharding = partitioning.batch_sharding(mesh, rules)
  step = partitioning.jit_sharded(
      train_step.make_train_step(model, objective, tx, schedule), mesh, rules,
      in_shardings=(shardings, batch_sharding, batch_sharding),
      out_shardings=(shardings, None, batch_sharding), donate_argnums=(0, 2))
  device_batch = jax.device_put(batch, batch_sharding)
  carry = jax.device_put(objective.initial_carry(model, batch_size), batch_sharding)
  start = time.perf_counter()
  state, metrics, carry = step(state, device_batch, carry)
  jax.block_until_ready(metrics)
  compile_s = time.perf_counter() - start
  start = time.perf_counter()
  for _ in range(steps):
    state, metrics, carry = step(state, device_batch, carry)
  jax.block_until_ready(metrics)
  seconds = (time.perf_counter() - start) / steps
  return {"size": size, "params_M": sum(x.size for x in jax.tree.leaves(abstract.params)) / 1e6,
          "step_s": seconds, "compile_s": compile_s,
          "tokens_per_sec": batch_size * length / seconds,
          "loss": float(metrics["loss"][0])}


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
  header = f"{'model':<12}{'params':>9}{'step s':>9}{'compile s':>11}{'tokens/s':>11}"
  print(header)
  print("-" * len(header))
  for size in args.sizes.split(","):
    r = time_train_step(size.strip(), args.batch_size, args.sequence_length, args.steps,
                        args.dtype)
    print(f"{'xlnet-' + r['size']:<12}{r['params_M']:>8.1f}M{r['step_s']:>9.3f}"
          f"{r['compile_s']:>11.1f}{r['tokens_per_sec']:>11.0f}", flush=True)


if __name__ == "__main__":
  main()
