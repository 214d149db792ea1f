"""Residual Transformer layers and an `nn.scan`-stacked encoder.

Stacking with `nn.scan` compiles one layer body instead of L copies (fast compiles for
24-layer models) and stores each parameter with a leading `layers` axis. ALBERT's
cross-layer sharing is the same scan with the parameters broadcast instead of stacked.
"""
from typing import Optional

import flax.linen as nn
import jax
import jax.numpy as jnp

from bertjax.layers import attention, ffn, norms

Dtype = jnp.dtype


class TransformerLayer(nn.Module):
  """Self-attention + feed-forward with residuals; post-LN (BERT) or pre-LN (GPT-2).

  Called as a scan body: `(x, mask, bias) -> (x, x or None)`, the second output being
  the layer's hidden state when `emit_hidden_state` is set. `decode`: self-attention
  with a key/value cache (bertjax.decoding).
  """
  num_heads: int
  head_dim: int
  intermediate_size: int
  activation: str = "gelu"
  hidden_dropout: float = 0.1
  attention_dropout: float = 0.1
  layer_norm_eps: float = 1e-12
  pre_norm: bool = False
  use_bias: bool = True
  init_std: float = 0.02
  dtype: Dtype = jnp.float32
  deterministic: bool = True
  emit_hidden_state: bool = False
  decode: bool = False

  @nn.compact
  def __call__(self, x: jax.Array, mask: Optional[jax.Array] = None,
               bias: Optional[jax.Array] = None):
    attn = attention.MultiHeadAttention(
        self.num_heads, self.head_dim, self.attention_dropout, self.use_bias,
        init_std=self.init_std, dtype=self.dtype, decode=self.decode, name="attention")
    mlp = ffn.MlpBlock(self.intermediate_size, self.activation, self.hidden_dropout,
                       self.use_bias, self.init_std, self.dtype, name="mlp")
    attention_norm = norms.LayerNorm(self.layer_norm_eps, self.dtype, name="attention_norm")
    mlp_norm = norms.LayerNorm(self.layer_norm_eps, self.dtype, name="mlp_norm")
    dropout = nn.Dropout(self.hidden_dropout)

    if self.pre_norm:
      h = attn(attention_norm(x), mask=mask, bias=bias, deterministic=self.deterministic)
      x = x + dropout(h, deterministic=self.deterministic)
      x = x + mlp(mlp_norm(x), deterministic=self.deterministic)
    else:
      h = attn(x, mask=mask, bias=bias, deterministic=self.deterministic)
      x = attention_norm(x + dropout(h, deterministic=self.deterministic))
      x = mlp_norm(x + mlp(x, deterministic=self.deterministic))
    x = nn.with_logical_constraint(x, ("batch", "length", "embed"))
    return x, (x if self.emit_hidden_state else None)


class TransformerStack(nn.Module):
  """`num_layers` TransformerLayers under `nn.scan` (parameters stacked on `layers`).

  share_parameters: ALBERT - one layer's parameters reused at every depth.
  remat: recompute activations in the backward pass (saves memory on long sequences).
  """
  num_layers: int
  num_heads: int
  head_dim: int
  intermediate_size: int
  activation: str = "gelu"
  hidden_dropout: float = 0.1
  attention_dropout: float = 0.1
  layer_norm_eps: float = 1e-12
  pre_norm: bool = False
  use_bias: bool = True
  init_std: float = 0.02
  dtype: Dtype = jnp.float32
  share_parameters: bool = False
  remat: bool = False

  @nn.compact
  def __call__(self, x: jax.Array, mask: Optional[jax.Array] = None,
               bias: Optional[jax.Array] = None, *, deterministic: bool = True,
               output_hidden_states: bool = False, decode: bool = False):
    """Returns (final hidden state, [num_layers + 1, B, L, H] hidden states or None).

    decode: incremental decoding; each layer keeps its key/value cache in the 'cache'
    collection (stacked on the layer axis like the parameters).
    """
    layer_cls = TransformerLayer
    if self.remat:
      layer_cls = nn.remat(layer_cls, prevent_cse=False)
    stacked = nn.scan(
        layer_cls,
        # Shared parameters are broadcast: created once, the same at every step.
        variable_axes={"cache": 0} if self.share_parameters else {"params": 0, "cache": 0},
        variable_broadcast="params" if self.share_parameters else False,
        split_rngs={"params": not self.share_parameters, "dropout": True},
        in_axes=(nn.broadcast, nn.broadcast),
        length=self.num_layers,
        metadata_params={} if self.share_parameters else {nn.PARTITION_NAME: "layers"},
    )
    x, per_layer = stacked(
        num_heads=self.num_heads, head_dim=self.head_dim,
        intermediate_size=self.intermediate_size, activation=self.activation,
        hidden_dropout=self.hidden_dropout, attention_dropout=self.attention_dropout,
        layer_norm_eps=self.layer_norm_eps, pre_norm=self.pre_norm, use_bias=self.use_bias,
        init_std=self.init_std, dtype=self.dtype, deterministic=deterministic,
        emit_hidden_state=output_hidden_states, decode=decode, name="layers")(x, mask, bias)
    return x, per_layer
