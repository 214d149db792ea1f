"""Sparse self-attention computed block by block: BigBird (ITC) and Longformer.

Neither forms an [L, L] score or mask array. Queries are cut into blocks; each block
gathers the few key blocks its pattern allows and scores only those, so time and memory
grow linearly with the sequence length. Both pad the sequence to their block multiple
internally (padding is masked) and cut the output back.

The specs (`BigBird`, `Longformer`) are small frozen dataclasses: the encoder config holds
one (`BertConfig.attention`), the Transformer layer asks it for its attention module
(`make`) and the encoder asks it for the mask it takes (`encoder_mask`, a TokenMask).
"""
import dataclasses
import math

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from bertjax.layers import attention
from bertjax.layers.long_attention import base, bigbird_plan
from bertjax.layers.long_attention import token_mask as tm


def _encoder_mask(attention_mask, segment_ids, global_attention_mask=None):
  return tm.from_features(attention_mask, segment_ids, global_attention_mask)


def _dense_attention(q, k, v, mask: tm.TokenMask):
  """Full attention from a TokenMask (short sequences only: BigBird's fallback)."""
  keep = mask.valid[:, None, None, :]
  if mask.segment_ids is not None:
    keep = keep & attention.segment_mask(mask.segment_ids)
  probs = attention.attention_probs(q, k, keep, scale_logits=False)
  return jnp.einsum("bhqk,bkhd->bqhd", probs.astype(v.dtype), v)


# ----------------------------------------------------------------------------- BigBird


@dataclasses.dataclass(frozen=True)
class BigBird:
  """BigBird ITC: 2 global blocks (first, last), a 3-block sliding window, r random blocks.

  random_seed: layer l draws its random plan with numpy seed `random_seed + l` (0 gives
    transformers' training-mode plan). eval_plan: 'seeded' keeps that plan at inference;
    'zeros' points every random block at block 0 when deterministic, which is what
    transformers does in eval mode. dense_fallback: full attention when the sequence has
    at most (5 + 2r) blocks, as the reference switches to 'original_full' there.
    plan_max_length: max_position_embeddings; the reference draws the paper's plans for
    lengths 1024 / 3072 / 4096 over this length. As in the reference, block-sparse
    attention applies no dropout to its probabilities.
  """
  block_size: int = 64
  num_random_blocks: int = 3
  random_seed: int = 0
  eval_plan: str = "seeded"
  dense_fallback: bool = True
  plan_max_length: int = 4096

  def __post_init__(self):
    if self.eval_plan not in ("seeded", "zeros"):
      raise ValueError(f"BigBird.eval_plan={self.eval_plan!r}; use 'seeded' or 'zeros'.")

  def make(self, *, num_heads, head_dim, dropout_rate, use_bias, init_std, dtype, num_layers,
           name):
    del dropout_rate  # see the class docstring
    return BigBirdAttention(self, num_heads, head_dim, use_bias, init_std, dtype,
                            num_layers=num_layers, name=name)

  encoder_mask = staticmethod(_encoder_mask)


def bigbird_attention(q, k, v, mask: tm.TokenMask, plan: jax.Array, block_size: int) -> jax.Array:
  """Block-sparse attention. q (already scaled), k, v: [B, n, H, D], n = blocks * block_size;
  plan: [H, blocks - 2, r] random key blocks of the non-global query blocks."""
  batch, n, heads, dim = q.shape
  nb = n // block_size
  blocked = lambda x: x.reshape(batch, nb, block_size, *x.shape[2:])
  qb, kb, vb = blocked(q), blocked(k), blocked(v)
  seg = mask.segment_ids

  # Global query blocks (first and last) see every key.
  g_logits = jnp.einsum("bgqhd,bkhd->bhgqk", qb[:, jnp.array([0, nb - 1])], k)
  g_keep = mask.valid[:, None, None, None, :]
  if seg is not None:
    g_seg = blocked(seg)[:, jnp.array([0, nb - 1])]
    g_keep = g_keep & (g_seg[:, None, :, :, None] == seg[:, None, None, None, :])
  g_probs = tm.softmax_masked(g_logits, g_keep).astype(v.dtype)
  g_out = jnp.einsum("bhgqk,bkhd->bgqhd", g_probs, v)

  # Other query blocks: [global 0, window i-1 i i+1, global last, random...] key blocks.
  rows = np.arange(1, nb - 1)
  fixed = np.stack([np.zeros_like(rows), rows - 1, rows, rows + 1,
                    np.full_like(rows, nb - 1)], -1)                     # [R, 5]
  table = jnp.concatenate([jnp.broadcast_to(fixed, (heads,) + fixed.shape), plan], -1)
  # A global block already inside the window is counted once (blocks 1 and nb - 2).
  slot_ok = np.ones(table.shape[1:], bool)
  slot_ok[:, 0] = rows - 1 > 0
  slot_ok[:, 4] = rows + 1 < nb - 1
  head_idx = jnp.arange(heads)[:, None, None]
  kg = kb.transpose(0, 3, 1, 2, 4)[:, head_idx, table]                 # [B, H, R, S, c, D]
  vg = vb.transpose(0, 3, 1, 2, 4)[:, head_idx, table]
  q_rows = qb[:, 1:nb - 1].transpose(0, 3, 1, 2, 4)                    # [B, H, R, c, D]
  logits = jnp.einsum("bhrqd,bhrskd->bhrqsk", q_rows, kg)
  valid_blocks = blocked(mask.valid)[:, table]                          # [B, H, R, S, c]
  keep = (valid_blocks & slot_ok[None, None, :, :, None])[:, :, :, None]
  if seg is not None:
    key_seg = blocked(seg)[:, table]
    keep = keep & (blocked(seg)[:, 1:nb - 1][:, None, :, :, None, None] == key_seg[:, :, :, None])
  shape = logits.shape
  probs = tm.softmax_masked(logits.reshape(*shape[:4], -1),
                            jnp.broadcast_to(keep, shape).reshape(*shape[:4], -1))
  out = jnp.einsum("bhrqsk,bhrskd->brqhd", probs.reshape(shape).astype(v.dtype), vg)

  out = jnp.concatenate([g_out[:, :1], out, g_out[:, 1:]], axis=1).reshape(batch, n, heads, dim)
  return jnp.where(mask.valid[:, :, None, None], out, 0)


class BigBirdAttention(base.LongSelfAttention):
  """BigBird self-attention with MultiHeadAttention's parameters (query/key/value/out)."""
  spec: BigBird
  num_layers: int = 1

  @nn.compact
  def __call__(self, inputs_q, inputs_kv=None, mask=None, bias=None, *, deterministic=True,
               layer_index=None):
    self.check_self_attention(inputs_kv, bias)
    batch, length, features = inputs_q.shape
    spec, bs = self.spec, self.spec.block_size
    mask = tm.resolve(mask, batch, length)
    q = self.project("query", inputs_q) / self.query_scale()
    k, v = self.project("key", inputs_q), self.project("value", inputs_q)
    q = nn.with_logical_constraint(q, ("batch", "length", "heads", "kv"))

    r = spec.num_random_blocks
    nb = -(-length // bs)
    if (spec.dense_fallback and length <= (5 + 2 * r) * bs) or nb < 3:
      context = _dense_attention(q, k, v, mask)
    else:
      n = nb * bs
      pad = lambda x: tm.pad_to_multiple(x, bs)
      if deterministic and spec.eval_plan == "zeros":
        plan = jnp.zeros((self.num_heads, nb - 2, r), jnp.int32)
      else:
        plans = bigbird_plan.layer_plans(n, bs, r, self.num_heads, self.num_layers,
                                         spec.random_seed, spec.plan_max_length)
        plan = jnp.asarray(plans)[0 if layer_index is None else layer_index]
      context = bigbird_attention(pad(q), pad(k), pad(v), tm.pad_mask(mask, bs), plan,
                                  bs)[:, :length]
    return self.output(context, features)


# ----------------------------------------------------------------------------- Longformer


@dataclasses.dataclass(frozen=True)
class Longformer:
  """Sliding-window attention (+ per-head dilation) with global attention on chosen tokens.

  window: one-sided window w (a token sees w neighbours each side: transformers'
    attention_window = 2w); a tuple gives one window per layer.
  dilation: per-head dilation d (the window then spans positions i + d*j, |j| <= w);
    empty = 1 for every head.
  global_tokens: positions with global attention when the encoder is given no
    global_attention_mask (0 = [CLS]); max_global_tokens bounds how many a row may
    have (a row with more gets NaN outputs rather than silently losing some).
  global_projections: separate query/key/value projections for global attention
    (`query_global`, ...), as in the paper and transformers.
  """
  window: int | tuple = 256
  dilation: tuple = ()
  global_tokens: tuple = (0,)
  max_global_tokens: int = 64
  global_projections: bool = True

  @property
  def max_window(self) -> int:
    return max(self.window) if isinstance(self.window, (tuple, list)) else self.window

  def make(self, *, num_heads, head_dim, dropout_rate, use_bias, init_std, dtype, num_layers,
           name):
    if isinstance(self.window, (tuple, list)) and len(self.window) != num_layers:
      raise ValueError(f"Longformer.window has {len(self.window)} entries for {num_layers} "
                       "layers; give one window per layer or a single int.")
    if self.dilation and len(self.dilation) != num_heads:
      raise ValueError(f"Longformer.dilation has {len(self.dilation)} entries for "
                       f"{num_heads} heads; give one per head or leave it empty.")
    return LongformerAttention(self, num_heads, head_dim, use_bias, init_std, dtype,
                               dropout_rate=dropout_rate, name=name)

  encoder_mask = staticmethod(_encoder_mask)


def _windows(x: jax.Array, chunk: int) -> jax.Array:
  """[B, n, ...] -> [B, n / chunk, 3 * chunk, ...]: chunk i's previous, own and next chunk."""
  batch, n = x.shape[:2]
  widths = [(0, 0), (chunk, chunk)] + [(0, 0)] * (x.ndim - 2)
  x = jnp.pad(x, widths).reshape(batch, n // chunk + 2, chunk, *x.shape[2:])
  return jnp.concatenate([x[:, :-2], x[:, 1:-1], x[:, 2:]], axis=2)


def sliding_window_attention(q, k, v, local_keys, segments, window, chunk: int,
                             global_k, global_v, global_keep, dropout):
  """Each query sees keys at offsets -w..w (allowed by `local_keys` [B, n]) plus the
  gathered global keys [B, G, H, D] (allowed by `global_keep` [B, n, G]), in one softmax.
  q (scaled), k, v: [B, n, H, D] with n a multiple of `chunk` >= w."""
  batch, n, heads, dim = q.shape
  nc = n // chunk
  qc = q.reshape(batch, nc, chunk, heads, dim)
  logits = jnp.einsum("bnqhd,bnkhd->bhnqk", qc, _windows(k, chunk))       # [B, H, nc, c, 3c]
  offset = np.arange(3 * chunk)[None, :] - chunk - np.arange(chunk)[:, None]
  keep = (jnp.abs(offset) <= window)[None, None] & _windows(local_keys, chunk)[:, :, None, :]
  if segments is not None:
    keep = keep & (segments.reshape(batch, nc, chunk)[..., None]
                   == _windows(segments, chunk)[:, :, None, :])
  g_logits = jnp.einsum("bnqhd,bghd->bhnqg", qc, global_k)                # [B, H, nc, c, G]
  g_keep = global_keep.reshape(batch, nc, chunk, -1)
  probs = tm.softmax_masked(jnp.concatenate([g_logits, logits], -1),
                            jnp.concatenate([g_keep, keep], -1)[:, None])
  probs = dropout(probs).astype(v.dtype)
  g = global_k.shape[1]
  out = (jnp.einsum("bhnqg,bghd->bnqhd", probs[..., :g], global_v)
         + jnp.einsum("bhnqk,bnkhd->bnqhd", probs[..., g:], _windows(v, chunk)))
  return out.reshape(batch, n, heads, dim)


def _dilated(fn, x_list, d: int):
  """Runs `fn` on each residue class mod d (a dilated window is a plain window there)."""
  if d == 1:
    return fn(*x_list)
  def split(x):  # [B, n, ...] -> [B * d, n / d, ...]
    b, n = x.shape[:2]
    return jnp.moveaxis(x.reshape(b, n // d, d, *x.shape[2:]), 2, 1).reshape(b * d, n // d,
                                                                            *x.shape[2:])
  out = fn(*[split(x) for x in x_list])
  b = out.shape[0] // d
  return jnp.moveaxis(out.reshape(b, d, *out.shape[1:]), 1, 2).reshape(b, -1, *out.shape[2:])


class LongformerAttention(base.LongSelfAttention):
  """Longformer self-attention: query/key/value/out (+ query/key/value_global)."""
  spec: Longformer
  dropout_rate: float = 0.0

  def _global_positions(self, mask: tm.TokenMask, length: int):
    """Indices [B, G] of the global tokens (first G, in order) and which slots are real."""
    glob = mask.global_tokens
    if glob is None:
      positions = np.asarray([p for p in self.spec.global_tokens if p < length], np.int32)
      glob = jnp.zeros(mask.valid.shape, bool).at[:, positions].set(True) & mask.valid
    g = min(self.spec.max_global_tokens, length)
    index = jnp.argsort(~glob, axis=1, stable=True)[:, :g]
    slot_ok = jnp.take_along_axis(glob, index, axis=1)
    overflow = glob.sum(axis=1) > g
    return glob, index, slot_ok, overflow

  @nn.compact
  def __call__(self, inputs_q, inputs_kv=None, mask=None, bias=None, *, deterministic=True,
               layer_index=None):
    self.check_self_attention(inputs_kv, bias)
    batch, length, features = inputs_q.shape
    spec = self.spec
    dilations = tuple(spec.dilation) or (1,) * self.num_heads
    chunk = spec.max_window
    multiple = chunk * math.lcm(*dilations)
    mask = tm.pad_mask(tm.resolve(mask, batch, length), multiple)
    x = tm.pad_to_multiple(inputs_q, multiple)
    n = x.shape[1]
    proj, scale = self.project, self.query_scale()
    q, k, v = proj("query", x) / scale, proj("key", x), proj("value", x)

    glob, g_index, g_ok, overflow = self._global_positions(mask, n)
    take = lambda a: jnp.take_along_axis(a, g_index[:, :, None, None], axis=1)
    seg = mask.segment_ids
    g_keep = jnp.broadcast_to(g_ok[:, None, :], (batch, n, g_ok.shape[1]))
    if seg is not None:
      g_keep = g_keep & (seg[:, :, None] == jnp.take_along_axis(seg, g_index, 1)[:, None, :])
    window = spec.window
    if isinstance(window, (tuple, list)):
      window = jnp.asarray(window)[0 if layer_index is None else layer_index]
    drop = lambda p: tm.dropout(self, p, self.dropout_rate, deterministic)

    # Heads grouped by dilation; each group attends over its residue classes.
    outs, order = [], []
    for d in sorted(set(dilations)):
      heads = np.asarray([h for h, hd in enumerate(dilations) if hd == d])
      order.extend(heads)
      fn = lambda q_, k_, v_, keys_, seg_, gk_, gv_, gkeep_: sliding_window_attention(
          q_, k_, v_, keys_, seg_, window, chunk, gk_, gv_, gkeep_, drop)
      gk, gv = take(k[:, :, heads]), take(v[:, :, heads])
      rep = lambda a: jnp.repeat(a, d, axis=0) if d > 1 else a
      local = _dilated(
          lambda q_, k_, v_, keys_, seg_, gkeep_: fn(q_, k_, v_, keys_, seg_, rep(gk), rep(gv),
                                                     gkeep_),
          [q[:, :, heads], k[:, :, heads], v[:, :, heads], mask.valid & ~glob,
           jnp.zeros((batch, n), jnp.int32) if seg is None else seg, g_keep], d)
      outs.append(local)
    context = jnp.concatenate(outs, axis=2)[:, :, np.argsort(order)]

    # Global tokens see every key, with their own projections.
    if spec.global_projections:
      g_q = proj("query_global", jnp.take_along_axis(x, g_index[:, :, None], 1)) / scale
      g_k, g_v = proj("key_global", x), proj("value_global", x)
    else:
      g_q, g_k, g_v = take(q), k, v
    keep = mask.valid[:, None, None, :]
    if seg is not None:
      keep = keep & (jnp.take_along_axis(seg, g_index, 1)[:, None, :, None] == seg[:, None, None])
    probs = drop(tm.softmax_masked(jnp.einsum("bghd,bkhd->bhgk", g_q, g_k), keep))
    g_out = jnp.einsum("bhgk,bkhd->bghd", probs.astype(g_v.dtype), g_v)
    rows = jnp.arange(batch)[:, None]
    context = context.at[rows, jnp.where(g_ok, g_index, n)].set(g_out, mode="drop")

    context = jnp.where(mask.valid[:, :, None, None], context, 0)
    context = jnp.where(overflow[:, None, None, None], jnp.nan, context)[:, :length]
    return self.output(context, features)
