r"""What a fine-tuning step does besides its matrix products, JAX against torch: the
optimizer update over every parameter, and the word-embedding table's gradient.

  python benchmarks/update_rates.py --out=benchmarks/results/update_rates.md

`finetune_vs_transformers.py` finds our fine-tuning step at 0.6-0.75 of torch's rate per
token slot, with the forward pass at parity; `gemm_rates.py` times the matrix products.
This times the two parts of the step that grow with the model and not with the batch, at
all-MiniLM-L6-v2's sizes by default (22.7M parameters, half of them the 30,522 x 384
word embeddings):

- **update**: the fine-tuning's update rule on every parameter. Ours: `optimizers.
  adamw_linear` (global-norm clipping at 1.0, AdamW, the schedule), jitted with the state
  donated, as the train step runs it. Theirs: transformers' Trainer's, i.e.
  `clip_grad_norm_(1.0)`, `torch.optim.AdamW.step()` and the LR scheduler's step.
- **embedding gradient**: the gather of `--tokens` rows from the table and the gradient
  back into the whole table (a scatter-add into zeros), as a step over that many token
  slots computes it; both sides' dense gradient.

Both alternate one call at a time for `--rounds` rounds (medians, after one warm-up).
"""
import argparse
import os
import statistics
import sys

os.environ.setdefault("JAX_PLATFORMS", "cpu")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import optax  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402

from bertjax.models import bert  # noqa: E402
from bertjax.train import optimizers  # noqa: E402
import side_by_side  # noqa: E402


def parameter_shapes(vocab: int, hidden: int, layers: int) -> dict[str, list[tuple[int, ...]]]:
  """The parameter shapes of a BERT encoder (heads of 64, FFN 4x) as each side lays them
  out: ours (the layers' weights stacked, as the layer loop scans them) and transformers'
  BertModel (a tensor per layer)."""
  config = bert.BertConfig(vocab_size=vocab, hidden_size=hidden, num_layers=layers,
                           num_heads=max(1, hidden // 64), intermediate_size=4 * hidden)
  params = jax.eval_shape(lambda: bert.init_params(bert.BertModel(config),
                                                   jax.random.PRNGKey(0)))
  theirs = transformers.BertModel(transformers.BertConfig(
      vocab_size=vocab, hidden_size=hidden, num_hidden_layers=layers,
      num_attention_heads=max(1, hidden // 64), intermediate_size=4 * hidden))
  return {"ours": [tuple(leaf.shape) for leaf in jax.tree.leaves(params)],
          "theirs": [tuple(p.shape) for p in theirs.parameters()]}


def updates(shapes: dict[str, list[tuple[int, ...]]], rounds: int) -> dict[str, float]:
  """Seconds per update of every parameter: ours and torch's (medians)."""
  rng = np.random.default_rng(0)
  draw = lambda shape, scale: rng.standard_normal(shape).astype(np.float32) * scale

  tx, _ = optimizers.adamw_linear(total_steps=1000, peak_value=1e-4, warmup_steps=100)
  params = [jnp.asarray(draw(s, 0.02)) for s in shapes["ours"]]
  grads = [jnp.asarray(draw(s, 1e-3)) for s in shapes["ours"]]
  state = tx.init(params)

  def update(params, state, grads):
    changes, state = tx.update(grads, state, params)
    return optax.apply_updates(params, changes), state
  update = jax.jit(update, donate_argnums=(0, 1))

  torch_params = [torch.nn.Parameter(torch.from_numpy(draw(s, 0.02))) for s in shapes["theirs"]]
  for p in torch_params:
    p.grad = torch.from_numpy(draw(tuple(p.shape), 1e-3))
  # The Trainer's groups: no weight decay on biases and LayerNorm weights (the 1-D ones).
  adamw = torch.optim.AdamW(
      [{"params": [p for p in torch_params if p.ndim > 1], "weight_decay": 0.01},
       {"params": [p for p in torch_params if p.ndim <= 1], "weight_decay": 0.0}], lr=1e-4)
  schedule = torch.optim.lr_scheduler.LambdaLR(adamw, lambda step: min(1.0, (step + 1) / 100))

  def ours():
    nonlocal params, state
    params, state = update(params, state, grads)
    jax.block_until_ready(params)

  def theirs():
    torch.nn.utils.clip_grad_norm_(torch_params, 1.0)
    adamw.step()
    schedule.step()

  return _alternate(ours, theirs, rounds)


def embedding_gradients(vocab: int, hidden: int, tokens: int, rounds: int) -> dict[str, float]:
  """Seconds per gather of `tokens` rows and gradient into the [vocab, hidden] table."""
  rng = np.random.default_rng(1)
  table = rng.standard_normal((vocab, hidden)).astype(np.float32)
  ids = rng.integers(0, vocab, tokens)
  cotangent = rng.standard_normal((tokens, hidden)).astype(np.float32)

  gradient = jax.jit(jax.grad(lambda t, i, c: jnp.sum(t[i] * c)))
  table_jax, ids_jax, cotangent_jax = jnp.asarray(table), jnp.asarray(ids), jnp.asarray(cotangent)
  embedding = torch.nn.Embedding(vocab, hidden, _weight=torch.from_numpy(table))
  ids_torch, cotangent_torch = torch.from_numpy(ids), torch.from_numpy(cotangent)

  def ours():
    jax.block_until_ready(gradient(table_jax, ids_jax, cotangent_jax))

  def theirs():
    embedding.weight.grad = None
    (embedding(ids_torch) * cotangent_torch).sum().backward()

  return _alternate(ours, theirs, rounds)


def _alternate(ours, theirs, rounds: int) -> dict[str, float]:
  ours(), theirs()  # warm-up: compilation, allocations
  times = {"ours": [], "theirs": []}
  for _ in range(rounds):
    times["ours"].append(side_by_side.timed(ours))
    times["theirs"].append(side_by_side.timed(theirs))
  return {side: statistics.median(values) for side, values in times.items()}


def main(argv=None) -> str:
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--vocab", type=int, default=30522)
  parser.add_argument("--hidden", type=int, default=384)
  parser.add_argument("--layers", type=int, default=6)
  parser.add_argument("--tokens", type=int, default=512,
                      help="token slots of a step (SST-2's 32 examples pack into ~512)")
  parser.add_argument("--rounds", type=int, default=10)
  parser.add_argument("--out", default=None, help="also write the table to this file")
  args = parser.parse_args(argv)

  shapes = parameter_shapes(args.vocab, args.hidden, args.layers)
  count = sum(int(np.prod(s)) for s in shapes["ours"])
  rows = {"update (clip, AdamW, schedule)": updates(shapes, args.rounds),
          f"embedding gradient ({args.tokens} tokens)":
              embedding_gradients(args.vocab, args.hidden, args.tokens, args.rounds)}
  lines = [f"jax {jax.__version__}, torch {torch.__version__} ({torch.get_num_threads()} "
           f"threads); {count / 1e6:.1f}M parameters (vocab {args.vocab}, hidden "
           f"{args.hidden}, {args.layers} layers), median of {args.rounds} alternating rounds",
           "", "| part | ours ms | torch ms | ours / torch, time |", "|---|---|---|---|"]
  for name, t in rows.items():
    lines.append(f"| {name} | {t['ours'] * 1e3:.2f} | {t['theirs'] * 1e3:.2f} | "
                 f"{t['ours'] / t['theirs']:.2f} |")
  table = "\n".join(lines)
  print(table)
  if args.out:
    with open(args.out, "w") as f:
      f.write(table + "\n")
  return table


if __name__ == "__main__":
  main()
