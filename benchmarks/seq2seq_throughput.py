r"""Encoder-decoder throughput: train-step tokens/s and decoding tokens/s (cached vs not).

  python benchmarks/seq2seq_throughput.py                    # t5-small, t5-v1_1-small, bart-base
  python benchmarks/seq2seq_throughput.py --models=t5:small --batch_size=4 --steps=2

Train: the real trainer step (Seq2SeqLM objective, Adafactor + inverse-sqrt, donated
state) on synthetic batches of `inputs_length` encoder and `targets_length` decoder
tokens; tokens/s counts both. Decode: `bertjax.decoding.generate` (greedy, batched,
jit-compiled) producing `new_tokens` tokens per row with the key/value cache and
without it (the whole prefix recomputed each step); tokens/s counts generated tokens.
"""
import argparse
import time

import flax.linen as nn
import jax
import numpy as np

from bertjax import decoding, optimizers, partitioning
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


def time_decoding(name: str, batch_size: int, inputs_length: int, new_tokens: int,
                  use_cache: bool, dtype: str) -> dict:
  model, config = build(name, dtype)
  ids = np.random.default_rng(0).integers(3, config.vocab_size,
                                          (batch_size, inputs_length)).astype(np.int32)
  params = nn.unbox(jax.jit(model.init)(jax.random.PRNGKey(0), ids[:1], ids[:1, :2])["params"])
  # No EOS: every row runs the full `new_tokens` steps, so the timing is comparable.
  run = lambda: decoding.generate(model, params, ids, model_config=config,
                                  max_new_tokens=new_tokens, eos_token_id=-1,
                                  use_cache=use_cache)
  start = time.perf_counter()
  out = run()
  compile_s = time.perf_counter() - start
  start = time.perf_counter()
  out = run()
  seconds = time.perf_counter() - start
  generated = out.shape[0] * (out.shape[1] - 1)
  return {"decode_s": seconds, "compile_s": compile_s, "tokens_per_sec": generated / seconds}


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
  args = parser.parse_args()
  print(f"{jax.device_count()} x {jax.devices()[0].device_kind}; batch {args.batch_size}, "
        f"inputs {args.inputs_length}, targets {args.targets_length}, compute {args.dtype}")
  for name in args.models.split(","):
    r = time_train_step(name, args.batch_size, args.inputs_length, args.targets_length,
                        args.steps, args.dtype)
    print(f"train   {name:<16}{r['params_M']:>8.1f}M  step {r['step_s']:.3f}s  "
          f"compile {r['compile_s']:.1f}s  {r['tokens_per_sec']:>9.0f} tokens/s", flush=True)
    if args.skip_decode:
      continue
    for use_cache in (True, False):
      d = time_decoding(name, args.batch_size, args.inputs_length, args.new_tokens, use_cache,
                        args.dtype)
      label = "cached" if use_cache else "uncached"
      print(f"decode  {name:<16}{label:>9}  {args.new_tokens} new tokens in {d['decode_s']:.2f}s  "
            f"compile {d['compile_s']:.1f}s  {d['tokens_per_sec']:>9.0f} tokens/s", flush=True)


if __name__ == "__main__":
  main()
