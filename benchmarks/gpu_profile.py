r"""Where gpu_step.py's BERT-base step spends its GPU time: ours per XLA op, torch's per kernel.

  python benchmarks/gpu_profile.py --variants=bfloat16:xla,bfloat16:cudnn   # on the GPU
  python benchmarks/gpu_profile.py --tiny --steps=1                          # smoke test

For each compute:attention variant, ours runs `--steps` steps under `jax.profiler.trace`;
the trace's GPU plane ("XLA Ops" line) gives each optimized-HLO op's device time, summed
over the steps (loops and calls left out: the ops inside them count). Ops are also
grouped by kind (a fusion's kind is read from the optimized HLO: what its body does: dot,
reduce, scatter...). Then transformers' model runs the same step under torch.profiler
and its kernels are summed the same way. On a CPU the XLA thunks stand in for the GPU ops
(as in profile_step.py). Writes $OUT/profile_<compute>_<attention>.md, its HLO, and
$OUT/profile_torch_<compute>.md when $OUT is set.

Seen on an H200 (benchmarks/results/gpu_step.md): torch's side read its kernels; ours
found no "XLA Ops" line in that first run, so the reader now falls back to the GPU
plane's stream lines and names every line it saw, for the next GPU run to settle.
"""
import argparse
import collections
import glob
import os
import re
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import jax  # noqa: E402
import torch  # noqa: E402

import gpu_step  # noqa: E402


def gpu_op_times(trace_dir: str) -> tuple[collections.Counter, str]:
  """(nanoseconds per op, where they were read). On a GPU: per HLO op from the device
  plane's "XLA Ops" line, else per kernel from its stream lines; on a CPU: per XLA thunk."""
  (path,) = glob.glob(os.path.join(trace_dir, "**", "*.xplane.pb"), recursive=True)
  ops, kernels, seen = collections.Counter(), collections.Counter(), []
  for plane in jax.profiler.ProfileData.from_file(path).planes:
    if "GPU" not in plane.name:
      continue
    for line in plane.lines:
      events = list(line.events)
      seen.append(f"{plane.name}/{line.name} ({len(events)} events)")
      for event in events:
        if line.name == "XLA Ops":
          ops[event.name.split(" = ")[0].lstrip("%")] += event.duration_ns
        elif line.name.startswith("Stream"):
          kernels[event.name[:120]] += event.duration_ns
  if ops or kernels:
    totals, source = (ops, "GPU plane, XLA Ops") if ops else (kernels, "GPU plane, kernels")
  else:  # a CPU run: its XLA thunks (imported here: profile_step defaults JAX to the CPU)
    import profile_step  # pylint: disable=g-import-not-at-top
    totals, source = profile_step.thunk_times(trace_dir), "CPU thunks"
  if seen:
    source += "; lines: " + ", ".join(seen[:12])
  # A loop or call spans the ops inside it, which are counted on their own.
  return collections.Counter({name: ns for name, ns in totals.items()
                              if not re.match(r"(while|conditional|call)(\.\d+)?$", name)}), source


def fusion_kinds(hlo_text: str) -> dict[str, str]:
  """Each op name of the optimized HLO -> a short description of what it computes: the
  opcode for a plain op; for a fusion, the notable opcodes in its body (dot, convolution,
  reduce, scatter, gather, rng, custom-call...) or 'elementwise'."""
  bodies, current = {}, None
  for line in hlo_text.splitlines():
    header = re.match(r"^(?:ENTRY )?%?([\w.\-]+) .*\{$", line)
    if header:
      current = header.group(1)
      bodies[current] = []
    elif current and line.strip() == "}":
      current = None
    elif current:
      bodies[current].append(line)
  notable = ("dot", "convolution", "reduce", "scatter", "gather", "rng", "custom-call",
             "dynamic-update-slice", "dynamic-slice", "transpose", "sort")
  kinds = {}
  for lines in bodies.values():
    for line in lines:
      op = re.match(r"\s*(?:ROOT )?%?([\w.\-]+) = \S+ ([\w\-]+)\(", line)
      if not op:
        continue
      name, opcode = op.groups()
      called = re.search(r"calls=%?([\w.\-]+)", line)
      if opcode == "fusion" and called:
        found = sorted({m for l in bodies.get(called.group(1), [])
                        for m in re.findall(r"= \S+ ([\w\-]+)\(", l) if m in notable})
        kinds[name] = "fusion(" + ",".join(found or ["elementwise"]) + ")"
      elif opcode == "custom-call":
        target = re.search(r'custom_call_target="([^"]+)"', line)
        kinds[name] = f"custom-call({target.group(1) if target else '?'})"
      else:
        kinds[name] = opcode
  return kinds


def table(totals: collections.Counter, steps: int, top: int, kinds=None) -> list[str]:
  busy = sum(totals.values()) / steps / 1e6
  rows = [f"device time {busy:.2f} ms/step", "", "| op | kind | ms/step | share |",
          "|---|---|---|---|"]
  kinds = kinds or {}
  for name, ns in totals.most_common(top):
    ms = ns / steps / 1e6
    rows.append(f"| {name} | {kinds.get(name, '')} | {ms:.3f} | {ms / busy:.1%} |")
  by_kind, counts = collections.Counter(), collections.Counter()
  for name, ns in totals.items():
    kind = kinds.get(name) or re.sub(r"[._]\d+$", "", name)
    by_kind[kind] += ns
    counts[kind] += 1
  rows += ["", "| kind | ops | ms/step | share |", "|---|---|---|---|"]
  for kind, ns in by_kind.most_common(top):
    ms = ns / steps / 1e6
    rows.append(f"| {kind} | {counts[kind]} | {ms:.3f} | {ms / busy:.1%} |")
  return rows


def profile_ours(config, batch, objective, steps: int, top: int) -> tuple[list[str], str]:
  train = gpu_step.ours(config, batch, objective)
  train.run(2)  # compile and warm up
  hlo = train.step.lower(train.state, train.batch, *train.carry).compile().as_text()
  with tempfile.TemporaryDirectory() as trace_dir:
    start = time.perf_counter()
    with jax.profiler.trace(trace_dir):
      train.run(steps)
    wall = (time.perf_counter() - start) / steps
    totals, source = gpu_op_times(trace_dir)
  rows = [f"ours, {config.dtype}, attention {config.attention_implementation}: "
          f"{wall * 1e3:.1f} ms/step wall under the profiler (read from: {source})"] + table(
              totals, steps, top, fusion_kinds(hlo))
  return rows, hlo


def profile_theirs(config, batch, device: str, steps: int, top: int) -> list[str]:
  bf16 = config.dtype == "bfloat16"
  run = gpu_step.theirs(config, batch, bf16, device)
  run(2)
  activities = [torch.profiler.ProfilerActivity.CPU]
  if device == "cuda":
    activities.append(torch.profiler.ProfilerActivity.CUDA)
  start = time.perf_counter()
  with torch.profiler.profile(activities=activities) as prof:
    run(steps)
  wall = (time.perf_counter() - start) / steps
  totals = collections.Counter()
  for event in prof.key_averages():
    device_us = getattr(event, "self_device_time_total", 0) if device == "cuda" else \
        event.self_cpu_time_total
    kernel = getattr(event, "device_type", None) == torch.autograd.DeviceType.CUDA
    if device_us > 0 and (device != "cuda" or kernel):
      totals[event.key[:120]] += int(device_us * 1e3)
  return [f"torch, {'autocast bf16' if bf16 else 'float32'}: {wall * 1e3:.1f} ms/step wall "
          "under the profiler"] + table(totals, steps, top)


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--batch_size", type=int, default=32)
  parser.add_argument("--sequence_length", type=int, default=512)
  parser.add_argument("--steps", type=int, default=3)
  parser.add_argument("--top", type=int, default=30)
  parser.add_argument("--tiny", action="store_true")
  parser.add_argument("--variants", default="bfloat16:xla,bfloat16:cudnn")
  parser.add_argument("--config", action="append", default=[],
                      help="NAME=VALUE changes to our BERT-base config (repeatable)")
  parser.add_argument("--torch", default="bfloat16",
                      help="comma-separated computes to profile torch's step in ('' for none)")
  args = parser.parse_args(argv)
  out = os.environ.get("OUT")
  base, batch, objective = gpu_step.setup(args)
  device = "cuda" if torch.cuda.is_available() else "cpu"
  header = f"{jax.devices()[0].device_kind}; batch {args.batch_size} x {args.sequence_length}" \
      f"{''.join(f', {c}' for c in args.config)}; {args.steps} profiled steps"
  written = []
  for dtype, attention in (v.split(":") for v in args.variants.split(",") if v):
    rows, hlo = profile_ours(base.replace(dtype=dtype, attention_implementation=attention),
                             batch, objective, args.steps, args.top)
    text = "\n".join([header, ""] + rows) + "\n"
    print(text, flush=True)
    if out:
      name = f"profile_{dtype}_{attention}"
      for suffix, body in ((".md", text), (".hlo.txt", hlo)):
        with open(os.path.join(out, name + suffix), "w") as f:
          f.write(body)
      written.append(name)
  for dtype in (d for d in args.torch.split(",") if d):
    rows = profile_theirs(base.replace(dtype=dtype), batch, device, args.steps, args.top)
    text = "\n".join([header, ""] + rows) + "\n"
    print(text, flush=True)
    if out:
      with open(os.path.join(out, f"profile_torch_{dtype}.md"), "w") as f:
        f.write(text)
  return written


if __name__ == "__main__":
  main()
