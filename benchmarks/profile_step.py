r"""Where one train step's time goes: the XLA CPU profile of a side_by_side case.

  python benchmarks/profile_step.py --case=electra-small --steps=3 --top=25

Runs the case's jitted train step under `jax.profiler.trace`, reads the trace back with
`jax.profiler.ProfileData`, and sums the time of each XLA thunk (a fusion, a dot, a
copy...) over the executor threads. Printed per step: the wall time, the thunks' summed
time, and the `--top` thunks by time with their share, so a hot spot that is not a
matrix product (a copy, a transpose, an RNG kernel, a scatter) stands out. With
`--hlo_dir` the optimized HLO is written there too, to read a thunk's body by name.
"""
import argparse
import collections
import glob
import os
import re
import sys
import tempfile
import time

os.environ.setdefault("JAX_PLATFORMS", "cpu")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import jax  # noqa: E402

import side_by_side  # noqa: E402
from bertjax.train import optimizers, partitioning  # noqa: E402
import step_timing  # noqa: E402

# Bookkeeping events of the CPU runtime, not work.
_RUNTIME = ("ThreadpoolListener", "ThunkExecutor", "SlinkyThreadPool", "end: ")


def thunk_times(trace_dir: str) -> collections.Counter:
  """Nanoseconds per thunk name, summed over every executor thread of the trace."""
  (path,) = glob.glob(os.path.join(trace_dir, "**", "*.xplane.pb"), recursive=True)
  totals = collections.Counter()
  for plane in jax.profiler.ProfileData.from_file(path).planes:
    for line in plane.lines:
      if line.name == "python" or not line.name.startswith("tf_XLA"):
        continue
      for event in line.events:
        if not event.name.startswith(_RUNTIME):
          totals[event.name] += event.duration_ns
  return totals


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--case", default="electra-small",
                      help=f"one of {side_by_side.CASES}")
  parser.add_argument("--batch_size", type=int, default=8)
  parser.add_argument("--sequence_length", type=int, default=128)
  parser.add_argument("--steps", type=int, default=3)
  parser.add_argument("--top", type=int, default=25)
  parser.add_argument("--tiny", action="store_true", help="shrink the model (smoke test)")
  parser.add_argument("--hlo_dir", default=None, help="also write the optimized HLO here")
  args = parser.parse_args(argv)
  overrides = side_by_side.tiny_overrides(args.case) if args.tiny else {}
  case = side_by_side.make_case(args.case, args.batch_size, args.sequence_length, overrides)
  mesh = partitioning.make_mesh((-1, 1))
  tx, schedule = optimizers.make_optimizer(total_steps=side_by_side.TOTAL)
  train = step_timing.TrainStep(case.model, case.objective, tx, schedule, case.batch, mesh,
                                partitioning.axis_rules())
  train.run(2)  # compile and warm up
  if args.hlo_dir:
    os.makedirs(args.hlo_dir, exist_ok=True)
    hlo = train.step.lower(train.state, train.batch, *train.carry).compile().as_text()
    with open(os.path.join(args.hlo_dir, f"{args.case.replace('/', '_')}.hlo.txt"), "w") as f:
      f.write(hlo)
  with tempfile.TemporaryDirectory() as trace_dir:
    start = time.perf_counter()
    with jax.profiler.trace(trace_dir):
      train.run(args.steps)
    wall = (time.perf_counter() - start) / args.steps
    totals = thunk_times(trace_dir)
  busy = sum(totals.values()) / args.steps / 1e9
  print(f"{args.case}, batch {args.batch_size} x {args.sequence_length}: "
        f"{wall * 1e3:.1f} ms/step wall (under the profiler), "
        f"{busy * 1e3:.1f} ms/step in thunks summed over threads")
  print("| thunk | ms/step | share |\n|---|---|---|")
  for name, ns in totals.most_common(args.top):
    ms = ns / args.steps / 1e6
    print(f"| {name} | {ms:.1f} | {ms / 1e3 / busy:.1%} |")
  kinds, counts = collections.Counter(), collections.Counter()
  for name, ns in totals.items():
    kind = re.sub(r"\.\d+$", "", name)  # fusion.12 -> fusion
    kinds[kind] += ns
    counts[kind] += 1
  print("\n| kind of thunk | count | ms/step | share |\n|---|---|---|---|")
  for kind, ns in kinds.most_common(args.top):
    ms = ns / args.steps / 1e6
    print(f"| {kind} | {counts[kind]} | {ms:.1f} | {ms / 1e3 / busy:.1%} |")


if __name__ == "__main__":
  main()
