"""Relative-position machinery of DeBERTa's disentangled attention (He et al., 2021).

DeBERTa scores a query i against a key j with three terms over the relative
distance delta(i, j) = i - j, mapped to an index r into a table of 2k relative
embeddings (k = "attention span"):

  content-to-content  q_i . k_j                    (ordinary attention)
  content-to-position q_i . K_r[delta(i, j)]        c2p
  position-to-content k_j . Q_r[delta(i, j)]        p2c  (the paper's delta(j, i) on the
                                                    key side; HF and the reference
                                                    code index it with the same delta)

All index arithmetic depends only on (static) sequence lengths, so it runs in numpy
at trace time and enters the graph as a constant gather index. DeBERTa v2/v3 first
maps delta to log-scaled buckets: exact within +-bucket_size/2, logarithmic beyond,
up to max_position.
"""
import jax
import jax.numpy as jnp
import numpy as np


def relative_positions(query_length: int, key_length: int) -> np.ndarray:
  """[q, k] int32: i - j."""
  return (np.arange(query_length)[:, None] - np.arange(key_length)[None, :]).astype(np.int32)


def log_bucket_positions(relative: np.ndarray, bucket_size: int, max_position: int) -> np.ndarray:
  """DeBERTa v2's log buckets: |delta| < bucket_size/2 kept exactly, larger distances
  compressed logarithmically so that max_position maps to about bucket_size.

  Computed in float32 like the reference, so bucket boundaries agree bit for bit.
  """
  relative = np.asarray(relative, np.int64)
  sign = np.sign(relative)
  mid = bucket_size // 2
  inside = (relative < mid) & (relative > -mid)
  abs_pos = np.where(inside, mid - 1, np.abs(relative)).astype(np.float32)
  with np.errstate(divide="ignore"):
    ratio = np.log(abs_pos / np.float32(mid)) / np.log(np.float32((max_position - 1) / mid))
  log_pos = np.ceil(ratio.astype(np.float32) * np.float32(mid - 1)) + mid
  return np.where(abs_pos <= mid, relative, log_pos * sign).astype(np.int32)


def span_index(relative: np.ndarray, span: int) -> np.ndarray:
  """delta -> row of a [2 * span] relative-embedding table (clipped at both ends)."""
  return np.clip(relative + span, 0, 2 * span - 1).astype(np.int32)


def content_to_position(query: jax.Array, pos_key: jax.Array, index: np.ndarray) -> jax.Array:
  """c2p[b, h, i, j] = query[b, i, h] . pos_key[index[i, j], h].

  query: [B, Q, H, D]; pos_key: [R, H, D] (projected relative embeddings);
  index: [Q, K] rows of pos_key. Returns [B, H, Q, K].
  """
  scores = jnp.einsum("bqhd,rhd->bhqr", query, pos_key)
  return jnp.take_along_axis(scores, jnp.asarray(index)[None, None], axis=-1)


def position_to_content(key: jax.Array, pos_query: jax.Array, index: np.ndarray) -> jax.Array:
  """p2c[b, h, i, j] = key[b, j, h] . pos_query[index[i, j], h].

  key: [B, K, H, D]; pos_query: [R, H, D]; index: [Q, K]. Returns [B, H, Q, K].
  """
  scores = jnp.einsum("bkhd,rhd->bhkr", key, pos_query)           # [B, H, K, R]
  gathered = jnp.take_along_axis(scores, jnp.asarray(index).T[None, None], axis=-1)
  return jnp.swapaxes(gathered, -1, -2)                           # [B, H, Q, K]
