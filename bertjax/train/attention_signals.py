"""Has a model learned word order? The attention its heads put on the neighbouring token.

A head that reads the previous or the next token is what lets an encoder use word order
(Clark et al., 2019, find such heads in every BERT; all-MiniLM-L6-v2 has one with 99.7% on
the previous token), and uniform attention over L tokens gives only 1/L. So the trainer
measures, at every evaluation, on its first held-out batches:

  attention_previous_max  the largest mean attention any head puts on the token just before
                          each query (layers x heads of the encoder's self-attention)
  attention_next_max      the same for the token just after
  attention_previous_head / attention_next_head   which head (layer * heads + head)

A query counts where it and that neighbour are real tokens of the same packed example.
Self-attention is every recorded probability array whose queries and keys are the batch's
tokens, outside a decoder (`scope`, a regular expression over the module path, narrows it:
ELECTRA's 'discriminator').
"""
import re
from typing import Optional

import flax
import gin
import jax
import jax.numpy as jnp
import numpy as np

from bertjax.layers import attention

SIGNALS = ("previous", "next")


def _real_and_segments(batch: dict, length: int):
  """[B, L] real-token flags and packed-example ids of the encoder's tokens."""
  segments = batch.get("segment_ids", batch.get("encoder_segment_ids"))
  if "attention_mask" in batch:
    real = batch["attention_mask"] > 0
  elif segments is not None:
    real = segments > 0
  else:
    real = jnp.ones(batch["input_ids"].shape[:2], bool)
  if segments is None:
    segments = jnp.ones(real.shape, jnp.int32)
  return real[:, :length], segments[:, :length]


def _self_attention(intermediates, length: int, scope: Optional[str]) -> list[jax.Array]:
  """The recorded [layers, B, heads, L, L] arrays of encoder self-attention, in module-path
  order (a head's index in the signals counts through them in this order)."""
  found = []
  flat = flax.traverse_util.flatten_dict(flax.core.unfreeze(intermediates))
  for path, value in sorted(flat.items()):
    name = "/".join(str(p) for p in path)
    if attention.PROBS_NAME not in name or "decoder" in name:
      continue
    if scope is not None and not re.search(scope, name):
      continue
    for probs in (value if isinstance(value, tuple) else (value,)):
      probs = probs if probs.ndim == 5 else probs[None]
      if probs.shape[-1] == probs.shape[-2] == length:
        found.append(probs)
  return found


def make_step(model, objective, scope: Optional[str] = None):
  """(params, batch) -> {signal: ([heads] sums, [heads] counts)}, or {} for a model
  without recorded self-attention (an LSTM)."""

  def step(params, batch):
    inputs = objective.model_inputs(batch)
    _, state = model.apply({"params": params}, **inputs, deterministic=True,
                           mutable=[attention.INTERMEDIATES])
    length = batch["input_ids"].shape[-1]
    arrays = _self_attention(state.get(attention.INTERMEDIATES, {}), length, scope)
    if not arrays:
      return {}
    real, segments = _real_and_segments(batch, length)
    eye = jnp.arange(length)
    out = {}
    for signal, offset in (("previous", -1), ("next", 1)):
      keys = jnp.clip(eye + offset, 0, length - 1)
      valid = (real & real[:, keys] & (segments == segments[:, keys])
               & (eye + offset >= 0) & (eye + offset < length))
      weights = valid[None, :, None, :].astype(jnp.float32)  # [1, B, 1, L]
      sums, counts = [], []
      for probs in arrays:  # [layers, B, heads, L, L]; networks may differ in heads
        on_neighbour = probs[..., eye, keys].astype(jnp.float32)  # [layers, B, heads, L]
        sums.append((on_neighbour * weights).sum(axis=(1, 3)).reshape(-1))
        counts.append(jnp.full(sums[-1].shape, weights.sum()))
      out[signal] = (jnp.concatenate(sums), jnp.concatenate(counts))
    return out

  return step


class Accumulator:
  """Sums per-head sums and counts over batches; `result()` gives the trainer's metrics."""

  def __init__(self):
    self.totals: dict[str, list[np.ndarray]] = {}

  def add(self, measured: dict) -> None:
    for signal, (sums, counts) in jax.device_get(measured).items():
      old = self.totals.get(signal)
      self.totals[signal] = [np.asarray(sums, np.float64), np.asarray(counts, np.float64)] \
          if old is None else [old[0] + sums, old[1] + counts]

  def result(self) -> dict[str, float]:
    out = {}
    for signal, (sums, counts) in self.totals.items():
      means = sums / np.maximum(counts, 1)
      out[f"attention_{signal}_max"] = float(means.max())
      out[f"attention_{signal}_head"] = int(means.argmax())
    return out


@gin.configurable
def attention_signal_scope(scope: Optional[str] = None) -> Optional[str]:
  """gin: a regular expression the attention's module path must match (e.g.
  'discriminator' for ELECTRA); None: every encoder self-attention."""
  return scope
