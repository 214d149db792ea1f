r"""The matrix products of a BERT-base train step, JAX against torch, f32 and bf16.

  python benchmarks/gemm_rates.py --out=benchmarks/results/gemm_rates.md

`side_by_side.py` compares whole train steps; this compares the libraries' matrix
products alone, at the shapes a BERT-base step at batch 8 x 128 runs (1,024 token rows),
so the part of the step ratio that comes from the GEMM library is measured, not assumed:
each projection's forward product (x @ W), the backward product for the input gradient
(dY @ W^T) and for the weight gradient (X^T @ dY), plus a 2048^3 square.

Each shape runs four ways, alternating one product at a time for `--rounds` rounds
(medians): f32 in JAX (jitted) and torch; bf16 operands in JAX accumulating and
returning f32 (`preferred_element_type`; on CPUs with AMX this is XLA's fast bf16 path,
while a bf16 result is not) and torch's bf16 matmul (bf16 result, f32 accumulation).
"""
import argparse
import os
import statistics
import time

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
from jax import lax  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402

TOKENS, HIDDEN, FFN = 1024, 768, 3072


def shapes(scale: int = 1) -> list[tuple[str, str, int, int, int]]:
  """(name, form, M, K, N): form 'nn' is A[M,K] @ B[K,N]; 'nt' is A[M,K] @ B[N,K]^T (an
  input gradient through a stored kernel); 'tn' is A[K,M]^T @ B[K,N] (a weight gradient).
  `scale` divides every size (a smoke test)."""
  t, h, f = TOKENS // scale, HIDDEN // scale, FFN // scale
  return [("attention projection", "nn", t, h, h), ("attention projection dX", "nt", t, h, h),
          ("attention projection dW", "tn", h, t, h),
          ("FFN in", "nn", t, h, f), ("FFN in dX", "nt", t, f, h), ("FFN in dW", "tn", h, t, f),
          ("FFN out", "nn", t, f, h), ("FFN out dX", "nt", t, h, f), ("FFN out dW", "tn", f, t, h),
          ("square", "nn", 2048 // scale, 2048 // scale, 2048 // scale)]


def operands(form: str, m: int, k: int, n: int):
  rng = np.random.default_rng(0)
  a = rng.standard_normal((k, m) if form == "tn" else (m, k), np.float32)
  b = rng.standard_normal((n, k) if form == "nt" else (k, n), np.float32)
  return a, b


def jax_product(form: str):
  """The jitted product, accumulating and returning f32 whatever the operands' type."""
  contract = {"nn": ((1,), (0,)), "nt": ((1,), (1,)), "tn": ((0,), (0,))}[form]
  return jax.jit(lambda a, b: lax.dot_general(a, b, (contract, ((), ())),
                                              preferred_element_type=jnp.float32))


def torch_product(form: str):
  return {"nn": lambda a, b: a @ b, "nt": lambda a, b: a @ b.T,
          "tn": lambda a, b: a.T @ b}[form]


def rates(form: str, m: int, k: int, n: int, rounds: int) -> dict[str, float]:
  """GFLOP/s of the four ways (medians over `rounds` alternating rounds)."""
  a, b = operands(form, m, k, n)
  ja, jb = jnp.asarray(a), jnp.asarray(b)
  jab, jbb = ja.astype(jnp.bfloat16), jb.astype(jnp.bfloat16)
  ta, tb = torch.from_numpy(a), torch.from_numpy(b)
  tab, tbb = ta.bfloat16(), tb.bfloat16()
  ours, theirs = jax_product(form), torch_product(form)
  ways = {"jax f32": lambda: ours(ja, jb).block_until_ready(),
          "torch f32": lambda: theirs(ta, tb),
          "jax bf16": lambda: ours(jab, jbb).block_until_ready(),
          "torch bf16": lambda: theirs(tab, tbb)}
  times = {name: [] for name in ways}
  for run in ways.values():  # compile and warm up
    run()
  for _ in range(rounds):
    for name, run in ways.items():
      start = time.perf_counter()
      run()
      times[name].append(time.perf_counter() - start)
  return {name: 2 * m * k * n / statistics.median(t) / 1e9 for name, t in times.items()}


def _figure(rate: float) -> str:
  """Three significant figures, without an exponent for large rates."""
  return f"{rate:.0f}" if rate >= 100 else f"{rate:.3g}"


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--rounds", type=int, default=9)
  parser.add_argument("--scale", type=int, default=1, help="divide every size (smoke test)")
  parser.add_argument("--out", default=None, help="also write the table (markdown) here")
  args = parser.parse_args(argv)
  lines = ["# The matrix products of a BERT-base step, JAX vs torch (benchmarks/gemm_rates.py)",
           "",
           f"{jax.devices()[0].device_kind}, jax {jax.__version__}, torch {torch.__version__} "
           f"({torch.get_num_threads()} threads); GFLOP/s, median of {args.rounds} alternating "
           "rounds",
           "",
           "| product | M x K x N | JAX f32 | torch f32 | JAX / torch f32 | JAX bf16 (f32 out) "
           "| torch bf16 | JAX / torch bf16 |",
           "|---|---|---|---|---|---|---|---|"]
  print("\n".join(lines), flush=True)
  totals = {}
  for name, form, m, k, n in shapes(args.scale):
    r = rates(form, m, k, n, args.rounds)
    for way, rate in r.items():  # FLOP-weighted: the seconds a step's products take
      totals[way] = totals.get(way, 0.0) + 2 * m * k * n / rate
    g = {way: _figure(rate) for way, rate in r.items()}
    row = (f"| {name} | {m} x {k} x {n} | {g['jax f32']} | {g['torch f32']} "
           f"| {r['jax f32'] / r['torch f32']:.2f} | {g['jax bf16']} | {g['torch bf16']} "
           f"| {r['jax bf16'] / r['torch bf16']:.2f} |")
    lines.append(row)
    print(row, flush=True)
  tail = (f"\nAll the products above in sequence: JAX / torch time ratio "
          f"{totals['torch f32'] / totals['jax f32']:.2f} in f32, "
          f"{totals['torch bf16'] / totals['jax bf16']:.2f} in bf16 "
          "(above 1: JAX faster).")
  lines.append(tail)
  print(tail)
  if args.out:
    with open(args.out, "w") as f:
      f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
  main()
