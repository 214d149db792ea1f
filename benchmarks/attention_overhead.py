r"""What recording attention / reading head masks costs a model that asks for neither.

  python benchmarks/attention_overhead.py

Prints, for BERT-mini and a 2-layer T5-small, the sha256 of the lowered training program
(gradient of the loss, dropout on) and its time per step. Run it at two commits: equal
hashes mean the compiled step is the same program, so the same speed.
"""
import hashlib
import time

import jax
import jax.numpy as jnp

from bertjax.models import bert, t5


def lowered_and_timed(model, steps: int = 10, **extra) -> tuple[str, float]:
  ids = jnp.ones((8, 128), jnp.int32)
  extra = {k: jnp.ones((8, 128), jnp.int32) for k in extra}
  params = jax.jit(model.init)(jax.random.PRNGKey(0), ids, **extra)["params"]

  def loss(p):
    out = model.apply({"params": p}, ids, **extra, deterministic=False,
                      rngs={"dropout": jax.random.PRNGKey(1)})
    return jnp.mean(out["last_hidden_state"] ** 2)

  step = jax.jit(jax.grad(loss))
  digest = hashlib.sha256(step.lower(params).as_text().encode()).hexdigest()[:16]
  jax.block_until_ready(step(params))
  start = time.perf_counter()
  for _ in range(steps):
    jax.block_until_ready(step(params))
  return digest, (time.perf_counter() - start) / steps


def main():
  models = {"bert-mini": (bert.BertModel(bert.bert_mini()), {}),
            "t5-small-2x2": (t5.T5Model(t5.t5_small(num_layers=2, num_decoder_layers=2)),
                             {"decoder_input_ids": True})}
  for name, (model, extra) in models.items():
    digest, seconds = lowered_and_timed(model, **extra)
    print(f"{name:14s} program sha256 {digest}  {seconds * 1000:8.1f} ms/step (batch 8 x 128)")


if __name__ == "__main__":
  main()
