r"""GPT throughput: causal-LM train-step tokens/s and decoding tokens/s (cached vs not).

  python benchmarks/gpt_throughput.py                                # gpt2 (124M)
  python benchmarks/gpt_throughput.py --models=gpt2 --overrides="num_layers=2" --steps=2

Train: the real trainer step (CausalLM objective, AdamW, donated state) on synthetic
[batch, length] token blocks; tokens/s counts input tokens. Decode:
`bertjax.inference.decoding.generate` (greedy, batched, jit-compiled) producing `new_tokens` tokens
per row after a `prompt_length` prompt, with the key/value cache and without it (the
whole sequence recomputed each step); tokens/s counts generated tokens. The encoder-
decoder lines (T5, BART) are in benchmarks/seq2seq_throughput.py.
"""
import argparse
import time

import flax.linen as nn
import jax
import numpy as np

from bertjax.inference import decoding
from bertjax.train import optimizers, partitioning
import step_timing
from bertjax.models import gpt
from bertjax.objectives import causal_lm


def build(name: str, dtype: str, overrides: dict):
  config = gpt.SIZES[name](dtype=dtype, **overrides)
  return gpt.GPTLMHeadModel(config), config


def time_train_step(name, batch_size, length, steps, dtype, overrides) -> dict:
  model, config = build(name, dtype, overrides)
  objective = causal_lm.CausalLM()
  mesh, rules = partitioning.make_mesh((-1, 1)), partitioning.axis_rules()
  tx, schedule = optimizers.make_optimizer(total_steps=1000)
  ids = np.random.default_rng(0).integers(3, config.vocab_size, (batch_size, length))
  batch = {"input_ids": ids.astype(np.int32),
           "attention_mask": np.ones((batch_size, length), np.int32)}
  params, seconds, compile_s = step_timing.time_train_step(model, objective, tx, schedule, batch,
                                                          steps, mesh, rules)
  return {"params_M": sum(x.size for x in jax.tree.leaves(params)) / 1e6,
          "step_s": seconds, "compile_s": compile_s,
          "tokens_per_sec": batch_size * length / seconds}


def time_decoding(name, batch_size, prompt_length, new_tokens, use_cache, dtype,
                  overrides) -> dict:
  model, config = build(name, dtype, overrides)
  ids = np.random.default_rng(0).integers(3, config.vocab_size,
                                          (batch_size, prompt_length)).astype(np.int32)
  params = nn.unbox(jax.jit(model.init)(jax.random.PRNGKey(0), ids[:1])["params"])
  # No EOS: every row runs all `new_tokens` steps, so the timings are comparable.
  run = lambda: decoding.generate(model, params, ids, max_new_tokens=new_tokens,
                                  eos_token_id=None, pad_token_id=0, use_cache=use_cache)
  start = time.perf_counter()
  run()
  compile_s = time.perf_counter() - start
  start = time.perf_counter()
  out = run()
  seconds = time.perf_counter() - start
  generated = out.shape[0] * (out.shape[1] - prompt_length)
  return {"decode_s": seconds, "compile_s": compile_s, "tokens_per_sec": generated / seconds}


def _overrides(text: str) -> dict:
  pairs = [item.split("=") for item in text.split(",") if item]
  return {k: (int(v) if v.isdigit() else v) for k, v in pairs}


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--models", default="gpt2")
  parser.add_argument("--overrides", default="", help="config fields, e.g. num_layers=2")
  parser.add_argument("--batch_size", type=int, default=8)
  parser.add_argument("--length", type=int, default=128)
  parser.add_argument("--prompt_length", type=int, default=32)
  parser.add_argument("--new_tokens", type=int, default=32)
  parser.add_argument("--steps", type=int, default=3)
  parser.add_argument("--dtype", default="float32", help="compute dtype (params stay f32)")
  parser.add_argument("--skip_train", action="store_true")
  args = parser.parse_args()
  overrides = _overrides(args.overrides)
  print(f"{jax.device_count()} x {jax.devices()[0].device_kind}; batch {args.batch_size}, "
        f"length {args.length}, prompt {args.prompt_length}, compute {args.dtype} {overrides}")
  for name in args.models.split(","):
    if not args.skip_train:
      r = time_train_step(name, args.batch_size, args.length, args.steps, args.dtype, overrides)
      print(f"train   {name:<12}{r['params_M']:>8.1f}M  step {r['step_s']:.3f}s  "
            f"compile {r['compile_s']:.1f}s  {r['tokens_per_sec']:>9.0f} tokens/s", flush=True)
    for use_cache in (True, False):
      d = time_decoding(name, args.batch_size, args.prompt_length, args.new_tokens, use_cache,
                        args.dtype, overrides)
      label = "cached" if use_cache else "uncached"
      print(f"decode  {name:<12}{label:>9}  {args.new_tokens} new tokens in {d['decode_s']:.2f}s"
            f"  compile {d['compile_s']:.1f}s  {d['tokens_per_sec']:>9.0f} tokens/s", flush=True)


if __name__ == "__main__":
  main()
