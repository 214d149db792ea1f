"""Count models that a masked LM's held-out loss is judged against.

A masked LM that has learned only token frequencies scores the unigram's cross-entropy at
its masked positions; one that reads a single neighbour can do as well as a count bigram.
So a held-out MLM loss under the bigram's is evidence of word order learned, which copying
the input or memorising the training text cannot fake.

    counts = NgramCounts(vocab_size)
    for ids in training_documents: counts.add(ids)
    counts.cross_entropy(held_out_documents)
    # {'unigram': nats, 'bigram': nats, 'bigram_interpolation': lam, 'tokens': n}

The unigram is add-`smoothing` (every id gets mass); the bigram looks one token to the left
and is interpolated with that unigram: P(w | v) = lam c(v, w) / c(v) + (1 - lam) P(w), and
the unigram alone where v was never seen. A document's first token has no left neighbour
and is scored by the unigram. Of the `interpolations` tried, the bigram reported is the
one the held-out text likes best: the strongest count bigram, so the bar a model must clear
is set as high as these counts allow.
"""
from typing import Iterable, Sequence

import numpy as np


class NgramCounts:
  """Unigram and left-bigram counts over documents of token ids."""

  def __init__(self, vocab_size: int, smoothing: float = 0.5,
               interpolations: Sequence[float] = (0.5, 0.7, 0.8, 0.9, 0.95, 0.98, 0.99)):
    if vocab_size < 1 or smoothing <= 0 or not interpolations or not all(
        0 <= lam < 1 for lam in interpolations):
      raise ValueError(f"NgramCounts: vocab_size={vocab_size}, smoothing={smoothing}, "
                       f"interpolations={interpolations}; need vocab_size >= 1, smoothing > 0 "
                       "and each interpolation in [0, 1).")
    self.vocab_size, self.smoothing = vocab_size, smoothing
    self.interpolations = tuple(interpolations)
    self.unigram = np.zeros(vocab_size, np.int64)
    self.left = np.zeros(vocab_size, np.int64)  # c(v): how often v has a right neighbour
    self._pairs: list[np.ndarray] = []  # bigram keys (v * V + w), merged lazily
    self._merged = (np.zeros(0, np.int64), np.zeros(0, np.int64))

  def add(self, ids: Sequence[int]) -> None:
    ids = self._checked(ids)
    self.unigram += np.bincount(ids, minlength=self.vocab_size)
    if len(ids) > 1:
      self.left += np.bincount(ids[:-1], minlength=self.vocab_size)
      self._pairs.append(ids[:-1] * self.vocab_size + ids[1:])
      if sum(len(p) for p in self._pairs) > 5_000_000:
        self._merge()

  def _checked(self, ids: Sequence[int]) -> np.ndarray:
    ids = np.asarray(ids, np.int64)
    if ids.size and (ids.min() < 0 or ids.max() >= self.vocab_size):
      raise ValueError(f"Token id {int(ids.max() if ids.max() >= self.vocab_size else ids.min())}"
                       f" is outside the vocabulary of {self.vocab_size} ids.")
    return ids

  def _merge(self) -> None:
    if not self._pairs:
      return
    keys, counts = self._merged
    new_keys, new_counts = np.unique(np.concatenate(self._pairs), return_counts=True)
    all_keys = np.concatenate([keys, new_keys])
    order = np.argsort(all_keys, kind="stable")
    all_keys, all_counts = all_keys[order], np.concatenate([counts, new_counts])[order]
    starts = np.flatnonzero(np.r_[True, all_keys[1:] != all_keys[:-1]])
    self._merged = (all_keys[starts], np.add.reduceat(all_counts, starts))
    self._pairs = []

  def _pair_counts(self, query: np.ndarray) -> np.ndarray:
    keys, counts = self._merged
    if not len(keys):
      return np.zeros(len(query), np.int64)
    where = np.minimum(np.searchsorted(keys, query), len(keys) - 1)
    return np.where(keys[where] == query, counts[where], 0)

  def unigram_probs(self) -> np.ndarray:
    counts = self.unigram + self.smoothing
    return counts / counts.sum()

  def cross_entropy(self, documents: Iterable[Sequence[int]]) -> dict:
    """Mean nats per held-out token under the unigram and the best interpolated bigram."""
    self._merge()
    p_uni = self.unigram_probs()
    lams = np.asarray(self.interpolations)[:, None]
    uni_nats, bi_nats, tokens = 0.0, np.zeros(len(lams)), 0
    for ids in documents:
      ids = self._checked(ids)
      if not ids.size:
        continue
      uni = p_uni[ids]
      uni_nats -= np.log(uni).sum()
      bi_nats -= np.log(uni[0])
      if len(ids) > 1:
        left = self.left[ids[:-1]]
        conditional = self._pair_counts(ids[:-1] * self.vocab_size + ids[1:]) / np.maximum(left, 1)
        lam = np.where(left > 0, lams, 0.0)  # [interpolations, tokens - 1]
        bi_nats -= np.log(lam * conditional + (1 - lam) * uni[1:]).sum(axis=1)
      tokens += len(ids)
    if not tokens:
      raise ValueError("cross_entropy: the held-out documents hold no tokens.")
    best = int(np.argmin(bi_nats))
    return {"unigram": uni_nats / tokens, "bigram": float(bi_nats[best]) / tokens,
            "bigram_interpolation": self.interpolations[best], "tokens": tokens}
