"""XLNet's two-stream relative self-attention (Yang et al., 2019; Dai et al., 2019).

Scores of a query i against a key j (Transformer-XL's decomposition, scaled by
1/sqrt(d) after the sum):

  (q_i + u) . k_j              content        u = `r_w_bias`
  (q_i + v) . W_r R_{i-j}      position       v = `r_r_bias`, R sinusoidal
  (q_i + b) . s_{ij}           segment        b = `r_s_bias`, s = s+ if i and j lie in
                                              the same segment else s- (`seg_embed`)

Keys and values always come from the content stream h (over [memory; h]). The
content stream queries with h; the query stream g queries with its own state,
which starts from a learned `mask_emb` and never sees its own token. Position
scores are computed against every relative distance once and then aligned with
the rel-shift reshape trick, as Transformer-XL does (no gather).
"""
from typing import Optional

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from bertjax.layers import attention, norms

# The query stream's probabilities, recorded next to the content stream's (attention.PROBS_NAME).
QUERY_PROBS_NAME = "query_attention_probs"

Dtype = jnp.dtype


def relative_distances(query_length: int, memory_length: int, attn_type: str = "bi") -> np.ndarray:
  """The distances i - j the position table covers, largest first.

  "bi": klen .. -qlen + 1 (keys on both sides); "uni": klen .. 1 (only the past).
  The rel-shift turns row i of the [q, len(distances)] score matrix into the scores
  for keys j = 0 .. klen - 1 at distance (memory_length + i) - j.
  """
  klen = query_length + memory_length
  end = {"bi": -query_length, "uni": -1}.get(attn_type)
  if end is None:
    raise ValueError(f"attn_type={attn_type!r}: use 'bi' (XLNet) or 'uni' (causal).")
  return np.arange(klen, end, -1, dtype=np.float32)


def sinusoid_table(distances: np.ndarray, d_model: int, clamp_len: int = -1) -> jax.Array:
  """[len, d_model]: [sin(d * f), cos(d * f)] with f_k = 10000^(-2k / d_model)."""
  if clamp_len > 0:
    distances = np.clip(distances, -clamp_len, clamp_len)
  inv_freq = 1.0 / (10000.0 ** (np.arange(0, d_model, 2, dtype=np.float32) / d_model))
  angles = jnp.asarray(distances)[:, None] * jnp.asarray(inv_freq)[None, :]
  return jnp.concatenate([jnp.sin(angles), jnp.cos(angles)], axis=-1)


def relative_position_embedding(batch_size: int, query_length: int, memory_length: int,
                                d_model: int, attn_type: str = "bi", bi_data: bool = False,
                                clamp_len: int = -1) -> jax.Array:
  """[1 or batch, R, d_model] position encodings R_{i-j}.

  bi_data: XLNet's bidirectional data pipeline - the first half of the batch reads
  text forwards, the second half backwards, so the second half gets mirrored
  distances.
  """
  distances = relative_distances(query_length, memory_length, attn_type)
  forward = sinusoid_table(distances, d_model, clamp_len)[None]
  if not bi_data:
    return forward
  if batch_size % 2:
    raise ValueError(f"bi_data needs an even batch size (forward + backward halves); "
                     f"got {batch_size}.")
  backward = sinusoid_table(-distances, d_model, clamp_len)[None]
  half = batch_size // 2
  return jnp.concatenate([jnp.repeat(forward, half, 0), jnp.repeat(backward, half, 0)], 0)


def rel_shift(scores: jax.Array, key_length: int) -> jax.Array:
  """Transformer-XL's shift: [..., q, R] scores per distance -> [..., q, key_length].

  Reading the [q, R] block as [R, q], dropping its first row and reading it back as
  [q, R - 1] moves row i left by q - i, which lines distance (mlen + i) - j up with
  key j. Entries past the table's end (only reachable for masked future keys under
  attn_type 'uni') wrap around, exactly as in the reference.
  """
  *lead, q, r = scores.shape
  x = scores.reshape(*lead, r, q)[..., 1:, :]
  return x.reshape(*lead, q, r - 1)[..., :key_length]


class TwoStreamRelativeAttention(nn.Module):
  """Relative multi-head attention for the content stream and (optionally) the query stream.

  Projections are stored as [embed, heads, kv] (q, k, v, o and the position projection r)
  with per-head biases u (`r_w_bias`), v (`r_r_bias`), b (`r_s_bias`) and the two segment
  embeddings `seg_embed` [2, heads, kv] (index 0: same segment, 1: different). The output
  is post-LayerNormed with a residual, per stream, with one set of weights.
  """
  num_heads: int
  head_dim: int
  dropout_rate: float = 0.0
  layer_norm_eps: float = 1e-12
  init_std: float = 0.02
  dtype: Dtype = jnp.float32

  def _param(self, name: str, shape: tuple, axes: tuple) -> jax.Array:
    init = nn.with_logical_partitioning(nn.initializers.normal(self.init_std), axes)
    return jnp.asarray(self.param(name, init, shape, jnp.float32), self.dtype)

  @nn.compact
  def __call__(self, h: jax.Array, g: Optional[jax.Array], memory: Optional[jax.Array],
               pos_emb: jax.Array, seg_diff: Optional[jax.Array],
               mask_h: Optional[jax.Array], mask_g: Optional[jax.Array],
               target_mapping: Optional[jax.Array], *, deterministic: bool = True):
    """h [B, L, E] content; g [B, P, E] query stream or None; memory [B, M, E] or None;
    pos_emb [1|B, R, E]; seg_diff [B, L, M + L] bool (True: different segments) or None;
    masks [B, 1, L, M + L] bool (True: may attend) or None; target_mapping [B, P, L]
    maps query-stream rows to positions. Returns (h', g')."""
    width = h.shape[-1]
    shape, axes = (width, self.num_heads, self.head_dim), ("embed", "heads", "kv")
    w_q, w_k, w_v, w_o, w_r = (self._param(n, shape, axes) for n in "qkvor")
    bias_axes = ("heads", "kv")
    u = self._param("r_w_bias", shape[1:], bias_axes)
    v = self._param("r_r_bias", shape[1:], bias_axes)
    b = self._param("r_s_bias", shape[1:], bias_axes)
    seg_embed = self._param("seg_embed", (2,) + shape[1:], (None, "heads", "kv"))
    norm = norms.LayerNorm(self.layer_norm_eps, self.dtype, name="layer_norm")

    project = lambda x, w: jnp.einsum("ble,end->blnd", x.astype(self.dtype), w)
    context = h if memory is None else jnp.concatenate([memory.astype(h.dtype), h], axis=1)
    key = nn.with_logical_constraint(project(context, w_k), ("batch", "kv_length", "heads", "kv"))
    value = nn.with_logical_constraint(project(context, w_v),
                                       ("batch", "kv_length", "heads", "kv"))
    pos_key = project(pos_emb, w_r)  # [1|B, R, heads, kv]

    def attend(query, mask, name):
      """[B, Q, heads, kv] queries (at positions 0..Q-1 of the segment) -> context; the
      probabilities are recorded as `name` (bertjax.layers.attention.observe)."""
      bias = self._relative_bias(query, pos_key, v, b, seg_embed, seg_diff, key.shape[1])
      probs = attention.attention_probs(query + u, key, mask, bias)
      probs = attention.attention_dropout(self, probs, self.dropout_rate, deterministic)
      probs = attention.observe(self, probs, name)
      return jnp.einsum("bnqk,bknd->bqnd", probs.astype(self.dtype), value)

    def finish(stream, ctx):
      out = jnp.einsum("bqnd,end->bqe", ctx, w_o)
      out = nn.Dropout(self.dropout_rate)(out, deterministic=deterministic)
      return nn.with_logical_constraint(norm(out + stream), ("batch", "length", "embed"))

    h_out = finish(h, attend(project(h, w_q), mask_h, attention.PROBS_NAME))
    if g is None:
      return h_out, None
    # The query stream's rows are scattered to the positions they predict, attended
    # there (so rel-shift and masks apply per position), then gathered back.
    query_g = project(g, w_q)
    if target_mapping is not None:
      tm = target_mapping.astype(self.dtype)
      ctx = attend(jnp.einsum("bpnd,bpl->blnd", query_g, tm), mask_g, QUERY_PROBS_NAME)
      ctx = jnp.einsum("blnd,bpl->bpnd", ctx, tm)
    else:
      ctx = attend(query_g, mask_g, QUERY_PROBS_NAME)
    return h_out, finish(g, ctx)

  def _relative_bias(self, query, pos_key, v, b, seg_embed, seg_diff, key_length):
    """Position and segment scores, pre-scaled by 1/sqrt(d) as attention_probs scales q.k."""
    position = jnp.einsum("bqnd,brnd->bnqr", query + v, pos_key)
    bias = rel_shift(position, key_length)
    if seg_diff is not None:
      seg = jnp.einsum("bqnd,snd->bnqs", query + b, seg_embed)  # [B, heads, Q, 2]
      bias = bias + jnp.where(seg_diff[:, None], seg[..., 1:2], seg[..., 0:1])
    return bias / jnp.sqrt(query.shape[-1]).astype(bias.dtype)
