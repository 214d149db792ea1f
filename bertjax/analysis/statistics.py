"""Per-head attention statistics of Clark et al. (2019), "What Does BERT Look At?".

For every head, averaged over all real query tokens of a dataset:
  cls, sep, punctuation   attention mass on [CLS] / [SEP] / punctuation keys (Fig. 2)
  previous, next          attention on the key just before / after the query (Sec. 3)
  entropy                 the entropy (nats) of the query's attention distribution (Fig. 4)
`previous` / `next` count a query only where that neighbour is a real token.
"""
import string
from typing import Mapping, Sequence

import numpy as np

STATISTICS = ("cls", "sep", "punctuation", "previous", "next", "entropy")
PUNCTUATION = set(string.punctuation) | {"``", "''", "\u2018", "\u2019", "\u201c", "\u201d"}


def is_punctuation(token: str) -> bool:
  """A token made of punctuation only (sub-word markers `##`, `\u0120`, `\u2581` ignored)."""
  core = token.lstrip("\u0120\u2581")
  core = core[2:] if core.startswith("##") and len(core) > 2 else core
  return bool(core) and all(c in PUNCTUATION for c in core)


def token_kinds(tokens: Sequence[Sequence[str]], length: int, cls_token: str,
                sep_token: str) -> dict[str, np.ndarray]:
  """[batch, length] booleans: which keys are `cls`, `sep`, `punctuation` tokens."""
  kinds = {name: np.zeros((len(tokens), length), bool) for name in ("cls", "sep", "punctuation")}
  for row, row_tokens in enumerate(tokens):
    for col, token in enumerate(row_tokens[:length]):
      kinds["cls"][row, col] = token == cls_token
      kinds["sep"][row, col] = token == sep_token
      kinds["punctuation"][row, col] = is_punctuation(token)
  return kinds


class HeadStatistics:
  """Accumulates the statistics over batches of attentions [layers, batch, heads, q, k]."""

  def __init__(self):
    self.sums: dict[str, np.ndarray] = {}
    self.counts: dict[str, np.ndarray] = {}

  def add(self, attentions: np.ndarray, attention_mask: np.ndarray,
          kinds: Mapping[str, np.ndarray]) -> None:
    probs = np.asarray(attentions, np.float64)
    if probs.ndim != 5:
      raise ValueError(f"attentions has shape {probs.shape}; expected [layers, batch, heads, "
                       "query, key].")
    real = np.asarray(attention_mask, bool)
    length = real.shape[1]
    if probs.shape[1] != real.shape[0] or probs.shape[-1] != length:
      raise ValueError(f"attention_mask has shape {real.shape}; the attentions ({probs.shape}) "
                       f"need [batch, key] = {(probs.shape[1], probs.shape[-1])}.")
    queries = real[None, :, None, :]  # [1, B, 1, Q]
    for name in ("cls", "sep", "punctuation"):
      mass = (probs * kinds[name][None, :, None, None, :]).sum(-1)
      self._add(name, mass, queries)
    eye = np.arange(length)
    previous = np.zeros_like(probs[..., 0])
    previous[..., 1:] = probs[..., eye[1:], eye[:-1]]
    self._add("previous", previous, queries & np.pad(real, ((0, 0), (1, 0)))[None, :, None, :-1])
    following = np.zeros_like(probs[..., 0])
    following[..., :-1] = probs[..., eye[:-1], eye[1:]]
    self._add("next", following, queries & np.pad(real, ((0, 0), (0, 1)))[None, :, None, 1:])
    entropy = -(probs * np.log(np.where(probs > 0, probs, 1.0))).sum(-1)
    self._add("entropy", entropy, queries)

  def _add(self, name: str, values: np.ndarray, where: np.ndarray) -> None:
    where = np.broadcast_to(where, values.shape)
    total = np.where(where, values, 0.0).sum(axis=(1, 3))
    count = where.sum(axis=(1, 3))
    self.sums[name] = self.sums.get(name, 0.0) + total
    self.counts[name] = self.counts.get(name, 0) + count

  def result(self) -> dict[str, np.ndarray]:
    """Statistic -> [layers, heads] means."""
    if not self.sums:
      raise ValueError("HeadStatistics: no attentions were added.")
    return {name: self.sums[name] / np.maximum(self.counts[name], 1) for name in STATISTICS}


def table(stats: Mapping[str, np.ndarray], top: int = 3) -> str:
  """A markdown table: per statistic, its mean over heads and the `top` heads (layer-head,
  1-based as in Clark et al.) with the highest value."""
  lines = ["| statistic | mean over heads | highest heads (layer-head: value) |", "|---|---|---|"]
  for name in STATISTICS:
    values = np.asarray(stats[name])
    order = np.argsort(values.ravel())[::-1][:top]
    best = ", ".join(f"{i // values.shape[1] + 1}-{i % values.shape[1] + 1}: "
                     f"{values.ravel()[i]:.3f}" for i in order)
    lines.append(f"| {name} | {values.mean():.3f} | {best} |")
  return "\n".join(lines)


def by_layer(stats: Mapping[str, np.ndarray]) -> str:
  """A markdown table of each statistic's mean per layer (rows: layers)."""
  layers = np.asarray(stats[STATISTICS[0]]).shape[0]
  lines = ["| layer | " + " | ".join(STATISTICS) + " |", "|---" * (len(STATISTICS) + 1) + "|"]
  for layer in range(layers):
    cells = " | ".join(f"{np.asarray(stats[n])[layer].mean():.3f}" for n in STATISTICS)
    lines.append(f"| {layer + 1} | {cells} |")
  return "\n".join(lines)
