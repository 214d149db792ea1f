r"""Parameter counts of ALBERT and BERT sizes: ours vs transformers vs the ALBERT paper.

  python benchmarks/param_counts.py      # prints a markdown table

Ours are counted on abstract shapes (jax.eval_shape), transformers' on the torch
meta device, so even xxlarge costs no memory. Counts are of the base encoder
(AlbertModel / BertModel, pooler included), as in the ALBERT paper's Table 1.
"""
import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax  # noqa: E402

from bertjax.models import albert, bert  # noqa: E402

PAPER_MILLIONS = {("albert", "base"): 12, ("albert", "large"): 18, ("albert", "xlarge"): 60,
                  ("albert", "xxlarge"): 235, ("bert", "base"): 108, ("bert", "large"): 334}


def ours_count(module) -> int:
  shapes = jax.eval_shape(lambda: bert.init_params(module, jax.random.PRNGKey(0)))
  return sum(x.size for x in jax.tree_util.tree_leaves(shapes))


def reference_count(family: str, cfg) -> int:
  import torch
  import transformers
  common = dict(hidden_size=cfg.hidden_size, num_hidden_layers=cfg.num_layers,
                num_attention_heads=cfg.num_heads, intermediate_size=cfg.intermediate_size,
                vocab_size=cfg.vocab_size)
  if family == "albert":
    config, cls = transformers.AlbertConfig(embedding_size=cfg.embedding_size, **common), \
        transformers.AlbertModel
  else:
    config, cls = transformers.BertConfig(**common), transformers.BertModel
  with torch.device("meta"):
    return sum(p.numel() for p in cls(config).parameters())


def rows():
  for (family, size), paper in PAPER_MILLIONS.items():
    if family == "albert":
      cfg = albert.SIZES[size]()
      module = albert.AlbertModel(cfg)
    else:
      cfg = bert.SIZES[size]()
      module = bert.BertModel(cfg)
    yield (f"{family.upper()} {size}", cfg, ours_count(module), reference_count(family, cfg), paper)


def main():
  print("| model | L | H | E | ours | transformers | paper (Table 1) |")
  print("|---|---|---|---|---|---|---|")
  for name, cfg, ours, ref, paper in rows():
    embedding = getattr(cfg, "embedding_size", cfg.hidden_size)
    print(f"| {name} | {cfg.num_layers} | {cfg.hidden_size} | {embedding} | {ours:,} | {ref:,} "
          f"| {paper}M |")


if __name__ == "__main__":
  main()
