r"""Dense vs BigBird / Longformer / Linformer attention as the sequence grows, on this CPU.

  python benchmarks/long_attention.py                      # 512 .. 8192, writes results/
  python benchmarks/long_attention.py --lengths=512,1024 --repeats=1 --out=/tmp/la

A tiny BERT encoder (2 layers, hidden 64, 2 heads, batch 1) - the attention dominates at
these lengths - with each attention from `bertjax.layers.long_attention.kinds.attention`:
BigBird block 64 + 3 random blocks (the sparse path at every length), Longformer w = 128
per side with [CLS] global, Linformer k = 256 (headwise); and ModernBERT of the same size,
whose first layer is global (dense) and second a 128-token sliding window (64 keys either
side, computed band by band: bertjax.layers.sliding_window), so at long lengths it costs
about half of dense: its global layers stay quadratic. For each length it times the
jitted forward pass and a train step (gradient of a scalar loss + SGD update), median of
`repeats` runs after compilation, and reads the compiled step's peak buffer memory from
XLA (`memory_analysis`: arguments + outputs + temporaries; independent of machine load).
It prints the table, every variant's ratio to dense at each length, and the growth
exponent b of a least-squares fit time ~ n^b (target: ~1 sparse / low-rank, ~2 dense),
and writes long_attention.png + results.md under --out. At each length every variant is
compiled first and then timed in interleaved rounds, so that other load on a shared machine
falls on all of them alike.
"""
import argparse
import os
import statistics
import time

import jax
import jax.numpy as jnp
import numpy as np

from bertjax.layers.long_attention import kinds as attention_types
from bertjax.models import bert, modernbert

VARIANTS = {
    "dense": dict(attention_type="dense"),
    "bigbird": dict(attention_type="bigbird", block_size=64, num_random_blocks=3,
                    dense_fallback=False),
    "longformer": dict(attention_type="longformer", window=128, global_tokens=(0,),
                       max_global_tokens=8),
    "linformer": dict(attention_type="linformer", projected_length=256, sharing="headwise"),
    "modernbert": None,  # its own model (build)
}


def build(variant: str, max_length: int):
  if variant == "modernbert":
    cfg = modernbert.ModernBertConfig(vocab_size=128, hidden_size=64, num_layers=2, num_heads=2,
                                      intermediate_size=128, local_attention=128,
                                      pad_token_id=0, cls_token_id=1, sep_token_id=2)
    model = modernbert.ModernBertModel(cfg)
    ids = jnp.ones((1, 8), jnp.int32)
    return model, model.init(jax.random.PRNGKey(0), ids)["params"]
  options = dict(VARIANTS[variant])
  if variant == "linformer":
    options["max_length"] = max_length
  cfg = bert.BertConfig(vocab_size=128, hidden_size=64, num_layers=2, num_heads=2,
                        intermediate_size=128, max_position_embeddings=max_length,
                        hidden_dropout=0.0, attention_dropout=0.0,
                        attention=attention_types.attention(**options))
  model = bert.BertModel(cfg, add_pooling_layer=False)
  return model, bert.init_params(model, jax.random.PRNGKey(0), length=8)


def _peak_bytes(compiled) -> int:
  stats = compiled.memory_analysis()
  return int(stats.argument_size_in_bytes + stats.output_size_in_bytes
             + stats.temp_size_in_bytes)


def _seconds(fn, *args) -> float:
  start = time.perf_counter()
  jax.block_until_ready(fn(*args))
  return time.perf_counter() - start


def prepare(variant: str, length: int, max_length: int) -> dict:
  """The variant's forward and train step at `length`, each compiled once and warmed up,
  with the train step's peak memory."""
  model, params = build(variant, max_length)
  ids = jax.random.randint(jax.random.PRNGKey(1), (1, length), 1, 128)
  mask = jnp.ones((1, length), jnp.int32)
  args = (params, ids, mask)

  def forward(p, i, m):
    return model.apply({"params": p}, i, m)["last_hidden_state"]

  def loss(p, i, m):
    return jnp.mean(forward(p, i, m) ** 2)

  def train_step(p, i, m):
    grads = jax.grad(loss)(p, i, m)
    return jax.tree_util.tree_map(lambda w, g: w - 1e-3 * g, p, grads)

  compiled = {name: jax.jit(fn).lower(*args).compile()
              for name, fn in (("forward", forward), ("train", train_step))}
  for fn in compiled.values():
    jax.block_until_ready(fn(*args))  # warm up
  return {"forward": lambda: _seconds(compiled["forward"], *args),
          "train": lambda: _seconds(compiled["train"], *args),
          "train_mb": _peak_bytes(compiled["train"]) / 2**20}


def measure_length(variants: list[str], length: int, max_length: int, repeats: int) -> dict:
  """Each variant's median forward and train-step time at `length`, timed in interleaved
  rounds (every variant once per round) so that load from other processes on a shared
  machine falls on all of them alike."""
  prepared = {v: prepare(v, length, max_length) for v in variants}
  times = {v: {"forward": [], "train": []} for v in variants}
  for _ in range(repeats):
    for v in variants:
      for key in ("forward", "train"):
        times[v][key].append(prepared[v][key]())
  return {v: {"forward_s": statistics.median(times[v]["forward"]),
              "train_s": statistics.median(times[v]["train"]),
              "train_mb": prepared[v]["train_mb"]} for v in variants}


def growth_exponent(lengths, values) -> float:
  return float(np.polyfit(np.log(lengths), np.log(values), 1)[0])


def report(results: dict, lengths: list[int]) -> str:
  lines = ["| variant | n | forward s | train step s | train peak MiB | fwd / dense | "
           "train / dense | mem / dense |", "|---|---|---|---|---|---|---|---|"]
  for variant, rows in results.items():
    for n, row in zip(lengths, rows):
      dense = results["dense"][lengths.index(n)]
      lines.append(f"| {variant} | {n} | {row['forward_s']:.4f} | {row['train_s']:.4f} | "
                   f"{row['train_mb']:.1f} | {row['forward_s'] / dense['forward_s']:.2f} | "
                   f"{row['train_s'] / dense['train_s']:.2f} | "
                   f"{row['train_mb'] / dense['train_mb']:.2f} |")
  lines += ["", "Growth exponent b (least squares, value ~ n^b over all lengths):", "",
            "| variant | forward | train step | train peak memory |", "|---|---|---|---|"]
  for variant, rows in results.items():
    fit = lambda key: growth_exponent(lengths, [r[key] for r in rows])
    lines.append(f"| {variant} | {fit('forward_s'):.2f} | {fit('train_s'):.2f} | "
                 f"{fit('train_mb'):.2f} |")
  return "\n".join(lines)


def plot(results: dict, lengths: list[int], path: str) -> None:
  import matplotlib
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt
  fig, axes = plt.subplots(1, 3, figsize=(13, 4))
  for ax, key, title in zip(axes, ("forward_s", "train_s", "train_mb"),
                            ("forward (s)", "train step (s)", "train step peak memory (MiB)")):
    for variant, rows in results.items():
      ax.loglog(lengths, [r[key] for r in rows], "o-", label=variant)
    ax.set_xlabel("sequence length")
    ax.set_title(title)
    ax.set_xticks(lengths, [str(n) for n in lengths])
    ax.grid(True, which="both", alpha=0.3)
  axes[0].legend()
  fig.suptitle("2-layer BERT encoder (hidden 64, 2 heads, batch 1), CPU")
  fig.tight_layout()
  fig.savefig(path, dpi=80)


def main(argv=None):
  parser = argparse.ArgumentParser()
  parser.add_argument("--lengths", default="512,1024,2048,4096,8192")
  parser.add_argument("--variants", default=",".join(VARIANTS))
  parser.add_argument("--repeats", type=int, default=3)
  parser.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results"))
  args = parser.parse_args(argv)
  lengths = [int(n) for n in args.lengths.split(",")]
  variants = args.variants.split(",")
  if "dense" not in variants:
    variants.insert(0, "dense")
  results = {v: [] for v in variants}
  for n in lengths:
    for variant, row in measure_length(variants, n, max(lengths), args.repeats).items():
      results[variant].append(row)
      print(f"{variant:>10} n={n:5d}  forward {row['forward_s']:.4f}s  train {row['train_s']:.4f}s"
            f"  peak {row['train_mb']:.1f} MiB", flush=True)
  table = report(results, lengths)
  print(table)
  os.makedirs(args.out, exist_ok=True)
  plot(results, lengths, os.path.join(args.out, "long_attention.png"))
  with open(os.path.join(args.out, "results.md"), "w") as f:
    f.write("# Long-sequence attention on this CPU (benchmarks/long_attention.py)\n\n"
            f"jax {jax.__version__}, {jax.devices()[0].platform}, shared 2-core machine: "
            "times are noisy, compare ratios within this one run.\n\n" + table + "\n")


if __name__ == "__main__":
  main()
