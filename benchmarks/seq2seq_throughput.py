r"""Encoder-decoder throughput: train-step tokens/s and decoding tokens/s (cached vs not).

  python benchmarks/seq2seq_throughput.py                    # t5-small, t5-v1_1-small, bart-base
  python benchmarks/seq2seq_throughput.py --models=t5:small --batch_size=4 --steps=2
  python benchmarks/seq2seq_throughput.py --skip_train --models=t5:small,bart:base \
      --inputs_length=512 --new_tokens=64 --repeats=2  # results/seq2seq_decoding.md

Train: the real trainer step (Seq2SeqLM objective, Adafactor + inverse-sqrt, donated
state) on synthetic batches of `inputs_length` encoder and `targets_length` decoder
tokens; tokens/s counts both. Decode: the jit-compiled greedy loop of
`bertjax.inference.decoding.generate` (batched, no EOS so every row makes `new_tokens` tokens),
compiled ahead of time, then timed (the fastest of `--repeats` interleaved rounds), in
three variants: `uncached` (the whole prefix and the cross-attention keys/values
recomputed each step), `self cache` (the self-attention key/value cache; cross-attention
keys/values still projected from the encoder output each step) and `self+cross` (both
cached). tokens/s counts generated tokens; the encoder pass is inside every variant's
time and is also printed alone ("loop alone" subtracts it).
"""
import argparse
import contextlib
import logging
import time

import flax.linen as nn
import jax
import numpy as np

from bertjax.inference import decoding
from bertjax.train import optimizers, partitioning
import step_timing
from bertjax.models import bart, t5
from bertjax.objectives import seq2seq

FAMILIES = {
    "t5": (t5.SIZES, t5.T5ForConditionalGeneration),
    "bart": (bart.SIZES, bart.BartForConditionalGeneration),
}


def build(name: str, dtype: str):
  family, size = name.split(":")
  sizes, module_cls = FAMILIES[family]
  config = sizes[size](dtype=dtype)
  return module_cls(config), config


def synthetic_batch(batch_size: int, inputs_length: int, targets_length: int, vocab_size: int,
                    start_id: int, seed: int = 0) -> dict:
  rng = np.random.default_rng(seed)
  labels = rng.integers(3, vocab_size, (batch_size, targets_length)).astype(np.int32)
  shifted = np.concatenate([np.full((batch_size, 1), start_id, np.int32), labels[:, :-1]], 1)
  return {
      "input_ids": rng.integers(3, vocab_size, (batch_size, inputs_length)).astype(np.int32),
      "attention_mask": np.ones((batch_size, inputs_length), np.int32),
      "decoder_input_ids": shifted, "labels": labels,
      "decoder_attention_mask": np.ones((batch_size, targets_length), np.int32),
      "label_weights": np.ones((batch_size, targets_length), np.float32),
  }


def time_train_step(name: str, batch_size: int, inputs_length: int, targets_length: int,
                    steps: int, dtype: str) -> dict:
  model, config = build(name, dtype)
  objective = seq2seq.Seq2SeqLM()
  mesh = partitioning.make_mesh((-1, 1))
  rules = partitioning.axis_rules()
  tx, schedule = optimizers.make_optimizer(total_steps=1000, optimizer=optimizers.adafactor,
                                           schedule=optimizers.inverse_sqrt, clip_grad_norm=None)
  batch = synthetic_batch(batch_size, inputs_length, targets_length, config.vocab_size,
                          config.decoder_start_token_id)
  params, seconds, compile_s = step_timing.time_train_step(model, objective, tx, schedule, batch,
                                                          steps, mesh, rules)
  return {"params_M": sum(x.size for x in jax.tree.leaves(params)) / 1e6,
          "step_s": seconds, "compile_s": compile_s,
          "tokens_per_sec": batch_size * (inputs_length + targets_length) / seconds}


DECODE_VARIANTS = {
    "uncached": dict(use_cache=False),
    "self cache": dict(cache_cross_attention=False),
    "self+cross": dict(),
}


@contextlib.contextmanager
def count_compiles():
  """A list that collects one entry per XLA compilation (jax.log_compiles messages)."""
  compiles = []
  handler = logging.Handler(logging.WARNING)
  handler.emit = lambda r: compiles.append(r) if "Compiling" in r.getMessage() else None
  logging.getLogger("jax").addHandler(handler)
  try:
    with jax.log_compiles():
      yield compiles
  finally:
    logging.getLogger("jax").removeHandler(handler)


def decoding_setup(name: str, batch_size: int, inputs_length: int, dtype: str):
  model, config = build(name, dtype)
  ids = np.random.default_rng(0).integers(3, config.vocab_size,
                                          (batch_size, inputs_length)).astype(np.int32)
  params = nn.unbox(jax.jit(model.init)(jax.random.PRNGKey(0), ids[:1], ids[:1, :2])["params"])
  mask = np.ones_like(ids)
  encode = jax.jit(lambda p: model.apply({"params": p}, ids, mask, method="encode"))
  jax.block_until_ready(encode(params))
  start = time.perf_counter()
  jax.block_until_ready(encode(params))
  return model, config, params, ids, mask, time.perf_counter() - start


def time_decoding(setup, new_tokens: int, variants: dict, repeats: int = 1) -> dict:
  """Compiles each variant ahead of time, then times `repeats` rounds of all of them in
  turn (interleaved, so load changes on a shared machine hit every variant alike);
  returns {label: result} with the fastest round's time."""
  model, config, params, ids, mask, encode_s = setup
  args = (params, ids, mask, jax.random.PRNGKey(0))
  compiled, results = {}, {}
  for label, variant in variants.items():
    # No EOS: every row runs the full `new_tokens` steps, so the timing is comparable.
    cfg = decoding.generation_config(config, max_new_tokens=new_tokens, eos_token_id=-1,
                                     **variant)
    with count_compiles() as compiles:
      start = time.perf_counter()
      compiled[label] = decoding._compiled(model, cfg).lower(*args).compile()
      results[label] = {"compile_s": time.perf_counter() - start, "decode_s": float("inf")}
    results[label]["compiles"] = len(compiles)
  for _ in range(repeats):
    for label, fn in compiled.items():
      start = time.perf_counter()
      _, length = jax.block_until_ready(fn(*args))
      seconds = time.perf_counter() - start
      results[label]["decode_s"] = min(results[label]["decode_s"], seconds)
      results[label]["generated"] = ids.shape[0] * (int(length) - 1)
  for r in results.values():
    r["tokens_per_sec"] = r["generated"] / r["decode_s"]
    r["loop_tokens_per_sec"] = r["generated"] / max(r["decode_s"] - encode_s, 1e-9)
  return results


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--models", default="t5:small,t5:v1_1_small,bart:base")
  parser.add_argument("--batch_size", type=int, default=8)
  parser.add_argument("--inputs_length", type=int, default=128)
  parser.add_argument("--targets_length", type=int, default=32)
  parser.add_argument("--new_tokens", type=int, default=32)
  parser.add_argument("--steps", type=int, default=3)
  parser.add_argument("--dtype", default="float32", help="compute dtype (params stay f32)")
  parser.add_argument("--skip_decode", action="store_true")
  parser.add_argument("--skip_train", action="store_true")
  parser.add_argument("--repeats", type=int, default=1,
                      help="decoding rounds per variant (interleaved; the fastest is kept)")
  parser.add_argument("--variants", default=",".join(DECODE_VARIANTS),
                      help=f"decoding variants, of {sorted(DECODE_VARIANTS)}")
  args = parser.parse_args()
  print(f"{jax.device_count()} x {jax.devices()[0].device_kind}; batch {args.batch_size}, "
        f"inputs {args.inputs_length}, targets {args.targets_length}, "
        f"new tokens {args.new_tokens}, compute {args.dtype}")
  for name in args.models.split(","):
    if not args.skip_train:
      r = time_train_step(name, args.batch_size, args.inputs_length, args.targets_length,
                          args.steps, args.dtype)
      print(f"train   {name:<16}{r['params_M']:>8.1f}M  step {r['step_s']:.3f}s  "
            f"compile {r['compile_s']:.1f}s  {r['tokens_per_sec']:>9.0f} tokens/s", flush=True)
    if args.skip_decode:
      continue
    setup = decoding_setup(name, args.batch_size, args.inputs_length, args.dtype)
    print(f"encode  {name:<16}{setup[-1]:.2f}s (inside every decode time below)", flush=True)
    results = time_decoding(setup, args.new_tokens,
                            {k: DECODE_VARIANTS[k] for k in args.variants.split(",")},
                            args.repeats)
    base = next(iter(results.values()))
    for label, d in results.items():
      print(f"decode  {name:<16}{label:>11}  {args.new_tokens} new tokens in {d['decode_s']:.2f}s"
            f"  compile {d['compile_s']:.1f}s ({d['compiles']} program)"
            f"  {d['tokens_per_sec']:>7.1f} tokens/s x{d['tokens_per_sec'] / base['tokens_per_sec']:.2f}"
            f"  loop alone {d['loop_tokens_per_sec']:>7.1f} tokens/s"
            f" x{d['loop_tokens_per_sec'] / base['loop_tokens_per_sec']:.2f}", flush=True)


if __name__ == "__main__":
  main()
