"""Attention heatmaps (PNG, matplotlib): one figure per layer with a panel per head, and
one figure of the per-head statistics (bertjax.analysis.statistics) as [layer, head] maps."""
import os
from typing import Mapping, Sequence

import numpy as np

from bertjax.analysis import statistics


def _pyplot():
  import matplotlib
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt
  return plt


def layer_heatmaps(attentions: np.ndarray, tokens: Sequence[str], out_dir: str,
                   prefix: str = "attention") -> list[str]:
  """attentions [layers, heads, query, key] of one example (its real tokens only) ->
  `out_dir/{prefix}_layer{l}.png` per layer (1-based); returns the paths."""
  plt = _pyplot()
  attentions = np.asarray(attentions)
  if attentions.ndim != 4 or attentions.shape[-1] != len(tokens):
    raise ValueError(f"attentions has shape {attentions.shape}; expected [layers, heads, "
                     f"query, key] with {len(tokens)} keys (one per token).")
  os.makedirs(out_dir, exist_ok=True)
  layers, heads = attentions.shape[:2]
  columns = min(heads, 4)
  rows = -(-heads // columns)
  size = max(2.5, 0.18 * len(tokens))
  paths = []
  for layer in range(layers):
    fig, axes = plt.subplots(rows, columns, figsize=(size * columns, size * rows), squeeze=False)
    for head, ax in enumerate(axes.ravel()):
      if head >= heads:
        ax.axis("off")
        continue
      ax.imshow(attentions[layer, head], cmap="viridis", vmin=0.0, vmax=1.0)
      ax.set_title(f"layer {layer + 1} head {head + 1}", fontsize=8)
      ax.set_xticks(range(len(tokens)), tokens, rotation=90, fontsize=5)
      ax.set_yticks(range(len(tokens)), tokens, fontsize=5)
    fig.tight_layout()
    path = os.path.join(out_dir, f"{prefix}_layer{layer + 1}.png")
    fig.savefig(path, dpi=110)
    plt.close(fig)
    paths.append(path)
  return paths


def statistics_figure(stats: Mapping[str, np.ndarray], path: str, title: str = "") -> str:
  """Each statistic as a [layer, head] heatmap, side by side (as Clark et al.'s Fig. 2 / 4)."""
  plt = _pyplot()
  names = statistics.STATISTICS
  fig, axes = plt.subplots(1, len(names), figsize=(3.0 * len(names), 3.2))
  for ax, name in zip(axes, names):
    values = np.asarray(stats[name])
    image = ax.imshow(values, cmap="magma", aspect="auto")
    ax.set_title(name, fontsize=9)
    ax.set_xlabel("head")
    ax.set_ylabel("layer")
    ax.set_xticks(range(values.shape[1]), range(1, values.shape[1] + 1), fontsize=6)
    ax.set_yticks(range(values.shape[0]), range(1, values.shape[0] + 1), fontsize=6)
    fig.colorbar(image, ax=ax, fraction=0.046)
  if title:
    fig.suptitle(title)
  fig.tight_layout()
  os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
  fig.savefig(path, dpi=110)
  plt.close(fig)
  return path


def curve_figure(xs: Sequence[float], series: Mapping[str, Sequence[float]], path: str,
                 xlabel: str, ylabel: str, title: str = "") -> str:
  """Line plot of one or more named series over xs (pruning and probing curves)."""
  plt = _pyplot()
  fig, ax = plt.subplots(figsize=(5, 3.5))
  for name, ys in series.items():
    ax.plot(xs, ys, marker="o", label=name)
  ax.set_xlabel(xlabel)
  ax.set_ylabel(ylabel)
  if title:
    ax.set_title(title)
  ax.grid(alpha=0.3)
  ax.legend()
  fig.tight_layout()
  os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
  fig.savefig(path, dpi=110)
  plt.close(fig)
  return path
