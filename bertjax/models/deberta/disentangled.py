"""DeBERTa's disentangled self-attention, its post-LN layer, and an `nn.scan` stack.

Logits are q.k + c2p + p2c (see bertjax.models.deberta.relative), all divided by
sqrt(d * (1 + number of relative terms)) so the three terms together keep unit scale.

Two parameterizations, as in the released checkpoints:
  version 1 (DeBERTa): one bias-free fused projection `in_proj` [embed, heads, 3, kv]
    (query/key/value interleaved per head) plus `q_bias` / `v_bias`; relative keys
    `pos_key` without bias, relative queries `pos_query` with bias.
  version 2 (DeBERTa v2/v3): `query`, `key`, `value` with biases; `pos_key` /
    `pos_query` with biases, or - share_att_key - the content projections reused on
    the relative embeddings.
"""
from typing import Optional, Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp

from bertjax.layers import attention, dense, ffn, norms, transformer
from bertjax.models.deberta import relative

Dtype = jnp.dtype
RELATIVE_TERMS = ("c2p", "p2c")


class DisentangledSelfAttention(nn.Module):
  """Attention of `query_states` (default: the input) over `inputs_kv`.

  rel_embeddings: [R, embed] relative-position table (already sliced to the span);
  rel_index: [Q, K] int, the table row of each (query, key) pair.
  """
  num_heads: int
  head_dim: int
  version: int = 2
  pos_att_type: Sequence[str] = RELATIVE_TERMS
  relative_attention: bool = True
  share_att_key: bool = False
  dropout_rate: float = 0.0
  pos_dropout_rate: float = 0.0
  init_std: float = 0.02
  dtype: Dtype = jnp.float32

  def _projection(self, name: str, shape=None, use_bias: bool = True) -> dense.DenseGeneral:
    shape = shape or (self.num_heads, self.head_dim)
    axes = ("embed", "heads") + (None,) * (len(shape) - 2) + ("kv",)
    return dense.DenseGeneral(shape, axes, use_bias=use_bias, init_std=self.init_std,
                              dtype=self.dtype, name=name)

  def _head_bias(self, name: str) -> jax.Array:
    return self.param(name, nn.with_logical_partitioning(nn.initializers.zeros, ("heads", "kv")),
                      (self.num_heads, self.head_dim), jnp.float32).astype(self.dtype)

  def _content(self, inputs_kv, query_states):
    """(query, key, value, query projection, key projection), each [B, L, heads, kv]."""
    if self.version == 1:
      in_proj = self._projection("in_proj", (self.num_heads, 3, self.head_dim), use_bias=False)
      kv = in_proj(inputs_kv)
      q = kv if query_states is inputs_kv else in_proj(query_states)
      return (q[..., 0, :] + self._head_bias("q_bias"), kv[..., 1, :],
              kv[..., 2, :] + self._head_bias("v_bias"), None, None)
    query_proj, key_proj = self._projection("query"), self._projection("key")
    return (query_proj(query_states), key_proj(inputs_kv), self._projection("value")(inputs_kv),
            query_proj, key_proj)

  @nn.compact
  def __call__(self, inputs_kv: jax.Array, mask: Optional[jax.Array] = None,
               rel_embeddings: Optional[jax.Array] = None, rel_index: Optional[jax.Array] = None,
               query_states: Optional[jax.Array] = None, *, deterministic: bool = True):
    unknown = set(self.pos_att_type) - set(RELATIVE_TERMS)
    if unknown:
      raise ValueError(f"pos_att_type {sorted(unknown)} unknown; use a subset of {RELATIVE_TERMS}.")
    if query_states is None:
      query_states = inputs_kv
    query, key, value, query_proj, key_proj = self._content(inputs_kv, query_states)
    scale = jnp.sqrt(jnp.float32(self.head_dim * (1 + len(self.pos_att_type)))).astype(self.dtype)
    query = query / scale

    bias = None
    if self.relative_attention and self.pos_att_type:
      rel = nn.Dropout(self.pos_dropout_rate)(rel_embeddings, deterministic=deterministic)
      rel = rel.astype(self.dtype)
      bias = 0.0
      if "c2p" in self.pos_att_type:
        proj = key_proj if self.share_att_key else self._projection(
            "pos_key", use_bias=self.version != 1)
        bias = bias + relative.content_to_position(query, proj(rel), rel_index)
      if "p2c" in self.pos_att_type:
        proj = query_proj if self.share_att_key else self._projection("pos_query")
        bias = bias + relative.position_to_content(key, proj(rel) / scale, rel_index)

    probs = attention.attention_probs(query, key, mask, bias, scale_logits=False)
    probs = attention.observe(self, attention.attention_dropout(self, probs, self.dropout_rate,
                                                                deterministic))
    context = jnp.einsum("bhqk,bkhd->bqhd", probs.astype(self.dtype), value)
    context = nn.with_logical_constraint(context, ("batch", "length", "heads", "kv"))
    out = dense.DenseGeneral(query_states.shape[-1], ("heads", "kv", "embed"), contract_dims=2,
                             init_std=self.init_std, dtype=self.dtype, name="out")(context)
    return nn.with_logical_constraint(out, ("batch", "length", "embed"))


class DisentangledLayer(nn.Module):
  """Post-LN block: LN(q + attn) then LN(x + mlp). The residual is the query stream,
  which differs from the key/value stream only in the enhanced mask decoder.

  Scan body: `(x, mask, rel_embeddings, rel_index) -> (x, x or None)`; with `carry_input`
  the carry is `(x, the previous layer's input)` (the stack's last input, for the EMD).
  """
  num_heads: int
  head_dim: int
  intermediate_size: int
  version: int = 2
  pos_att_type: Sequence[str] = RELATIVE_TERMS
  relative_attention: bool = True
  share_att_key: bool = False
  activation: str = "gelu"
  hidden_dropout: float = 0.1
  attention_dropout: float = 0.1
  layer_norm_eps: float = 1e-7
  init_std: float = 0.02
  dtype: Dtype = jnp.float32
  deterministic: bool = True
  emit_hidden_state: bool = False
  carry_input: bool = False

  @nn.compact
  def __call__(self, x, mask=None, rel_embeddings=None, rel_index=None, query_states=None):
    if self.carry_input:
      x, _ = x
    query_states = x if query_states is None else query_states
    h = DisentangledSelfAttention(
        self.num_heads, self.head_dim, self.version, tuple(self.pos_att_type),
        self.relative_attention, self.share_att_key, self.attention_dropout, self.hidden_dropout,
        self.init_std, self.dtype, name="attention")(
            x, mask, rel_embeddings, rel_index, query_states, deterministic=self.deterministic)
    h = nn.Dropout(self.hidden_dropout)(h, deterministic=self.deterministic)
    h = norms.LayerNorm(self.layer_norm_eps, self.dtype, name="attention_norm")(query_states + h)
    mlp = ffn.MlpBlock(self.intermediate_size, self.activation, self.hidden_dropout,
                       init_std=self.init_std, dtype=self.dtype, name="mlp")
    out = norms.LayerNorm(self.layer_norm_eps, self.dtype, name="mlp_norm")(
        h + mlp(h, deterministic=self.deterministic))
    out = nn.with_logical_constraint(out, ("batch", "length", "embed"))
    return (out, x) if self.carry_input else out, (out if self.emit_hidden_state else None)


class DisentangledStack(nn.Module):
  """`num_layers` DisentangledLayers under `nn.scan` (params stacked on `layers`); the
  mask, relative table and index are broadcast to every layer.

  layer: DisentangledLayer keyword arguments (sizes, version...) as a tuple of pairs.
  scan_unroll: layers per loop iteration (transformer.layers_per_iteration; 0: by backend).
  """
  num_layers: int
  layer: tuple
  remat: bool = False
  scan_unroll: int = 0

  @nn.compact
  def __call__(self, x, mask=None, rel_embeddings=None, rel_index=None, *,
               deterministic: bool = True, output_hidden_states: bool = False,
               keep_last_input: bool = False):
    """Returns (final hidden state, [num_layers, B, L, H] per-layer states or None), and
    with `keep_last_input` also the last layer's input (the penultimate hidden state)."""
    layer_cls = nn.remat(DisentangledLayer, prevent_cse=False) if self.remat else DisentangledLayer
    stacked = nn.scan(
        layer_cls, variable_axes={"params": 0, **attention.ANALYSIS_AXES},
        split_rngs={"params": True, "dropout": True},
        in_axes=(nn.broadcast, nn.broadcast, nn.broadcast), length=self.num_layers,
        unroll=transformer.layers_per_iteration(self.scan_unroll, self.num_layers),
        metadata_params={nn.PARTITION_NAME: "layers"})
    carry, per_layer = stacked(**dict(self.layer), deterministic=deterministic,
                               emit_hidden_state=output_hidden_states,
                               carry_input=keep_last_input, name="layers")(
                                   (x, x) if keep_last_input else x, mask, rel_embeddings,
                                   rel_index)
    if keep_last_input:
      out, last_input = carry
      return out, per_layer, last_input
    return carry, per_layer

  def last_layer(self, x, mask=None, rel_embeddings=None, rel_index=None, query_states=None, *,
                 deterministic: bool = True) -> jax.Array:
    """The stack's last layer, with its own (shared, not copied) parameters: the enhanced
    mask decoder's layer. Call after the stack has run (its parameters exist then)."""
    stacked = nn.unbox(self.variables["params"]["layers"])
    params = jax.tree_util.tree_map(lambda p: p[-1], stacked)
    # A detached module run on the sliced parameters: their gradient flows to the stack's.
    layer = DisentangledLayer(**dict(self.layer), deterministic=deterministic, parent=None)
    rngs = None if deterministic else {"dropout": self.make_rng("dropout")}
    out, _ = layer.apply({"params": params}, x, mask, rel_embeddings, rel_index, query_states,
                         rngs=rngs)
    return out
