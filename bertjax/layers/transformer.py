"""Residual Transformer layers and an `nn.scan`-stacked encoder.

Stacking with `nn.scan` compiles one layer body instead of L copies (fast compiles for
24-layer models) and stores each parameter with a leading `layers` axis. ALBERT's
cross-layer sharing is the same scan with the parameters broadcast instead of stacked.
"""
import dataclasses
import functools
from typing import Any, Optional

import flax.linen as nn
import jax
import jax.numpy as jnp

from bertjax.layers import attention, ffn, norms

Dtype = jnp.dtype


class LayerFields(nn.Module):
  """The fields a TransformerLayer and a TransformerStack of them share (the stack hands
  them on to its layers)."""
  num_layers: int  # depth of the stack (a layer: for per-layer attention patterns)
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
  # Long-sequence attention (a spec from bertjax.layers.long_attention.sparse / lowrank; None =
  # dense). In a stack the mask is then the spec's `encoder_mask` (a TokenMask) and each layer
  # gets its index.
  attention_spec: Optional[Any] = None
  attention_implementation: str = "xla"  # attention.IMPLEMENTATIONS
  rotary_base: float = 0.0  # rotary positions on queries and keys (layers.rotary); 0: none

  def layer_fields(self) -> dict:
    """These fields' values, as keyword arguments of a TransformerLayer."""
    return {f.name: getattr(self, f.name) for f in dataclasses.fields(LayerFields)
            if f.name not in ("parent", "name")}


class TransformerLayer(LayerFields):
  """Self-attention + feed-forward with residuals; post-LN (BERT) or pre-LN (GPT-2).

  Called as a scan body: `(x, mask, bias) -> (x, x or None)`, the second output being
  the layer's hidden state when `emit_hidden_state` is set. `decode`: self-attention
  with a key/value cache (bertjax.inference.decoding).
  """
  deterministic: bool = True
  emit_hidden_state: bool = False
  decode: bool = False

  @nn.compact
  def __call__(self, x: jax.Array, mask: Optional[Any] = None,
               bias: Optional[jax.Array] = None, positions: Optional[jax.Array] = None,
               layer_index: Optional[jax.Array] = None):
    if self.attention_spec is None:
      attn = functools.partial(attention.MultiHeadAttention(
          self.num_heads, self.head_dim, self.attention_dropout, self.use_bias,
          init_std=self.init_std, dtype=self.dtype, decode=self.decode,
          implementation=self.attention_implementation, rotary_base=self.rotary_base,
          name="attention"), positions=positions)
    elif self.rotary_base:
      raise ValueError("Rotary positions work with dense attention only; this stack's "
                       f"attention is {type(self.attention_spec).__name__}.")
    elif self.attention_implementation != "xla":
      raise ValueError(f"attention_implementation={self.attention_implementation!r} runs dense "
                       f"attention only; this stack's attention is "
                       f"{type(self.attention_spec).__name__}. Use 'xla'.")
    else:
      attn = functools.partial(self.attention_spec.make(
          num_heads=self.num_heads, head_dim=self.head_dim, dropout_rate=self.attention_dropout,
          use_bias=self.use_bias, init_std=self.init_std, dtype=self.dtype,
          num_layers=self.num_layers, name="attention"), layer_index=layer_index)
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


def layers_per_iteration(scan_unroll: int, num_layers: int) -> int:
  """How many layers one iteration of the stack's loop runs: `scan_unroll` when given, and
  for 0 the whole stack on a GPU, one layer elsewhere.

  Measured on the train step (benchmarks/results/gpu_step.md, side_by_side.md): on an H200
  BERT-base's bf16 step ran 1.47x faster fully unrolled (1.25x with cuDNN attention); on a
  2-core CPU BERT-base was equal either way and ELECTRA-small 1.24x faster, at twice the
  compile time. TPUs keep the scan, as t5x and MaxText do, for its compile time.
  """
  if scan_unroll < 0:
    raise ValueError(f"scan_unroll={scan_unroll}: give the layers per loop iteration (1 to "
                     f"num_layers={num_layers}), or 0 to choose by backend.")
  if scan_unroll:
    return min(scan_unroll, num_layers)
  return num_layers if jax.default_backend() == "gpu" else 1


class TransformerStack(LayerFields):
  """`num_layers` TransformerLayers under `nn.scan` (parameters stacked on `layers`).

  share_parameters: ALBERT - one layer's parameters reused at every depth.
  remat: recompute activations in the backward pass (saves memory on long sequences).
  scan_unroll: layers per iteration of the scan's loop; `num_layers` unrolls it fully,
    0 (the default) chooses by backend (`layers_per_iteration`). The parameters are the
    same either way. Unrolled compiles longer but skips the loop's stacking of
    activations for the backward pass.
  """
  share_parameters: bool = False
  remat: bool = False
  scan_unroll: int = 0

  @nn.compact
  def __call__(self, x: jax.Array, mask: Optional[jax.Array] = None,
               bias: Optional[jax.Array] = None, *, positions: Optional[jax.Array] = None,
               deterministic: bool = True, output_hidden_states: bool = False,
               decode: bool = False):
    """Returns (final hidden state, [num_layers + 1, B, L, H] hidden states or None).

    positions: [B, L] token positions for rotary attention (default 0..L-1).

    decode: incremental decoding; each layer keeps its key/value cache in the 'cache'
    collection (stacked on the layer axis like the parameters).
    """
    if hasattr(self.attention_spec, "stack_inputs"):  # e.g. Linformer's layerwise projection
      mask = self.attention_spec.stack_inputs(self, mask)
    layer_cls = TransformerLayer
    if self.remat:
      layer_cls = nn.remat(layer_cls, prevent_cse=False)
    stacked = nn.scan(
        layer_cls,
        # Shared parameters are broadcast: created once, the same at every step.
        variable_axes={"cache": 0, **attention.ANALYSIS_AXES, **(
            {} if self.share_parameters else {"params": 0})},
        variable_broadcast="params" if self.share_parameters else False,
        split_rngs={"params": not self.share_parameters, "dropout": True},
        in_axes=(nn.broadcast,) * 3 + ((0,) if self.attention_spec is not None else ()),
        length=self.num_layers, unroll=layers_per_iteration(self.scan_unroll, self.num_layers),
        metadata_params={} if self.share_parameters else {nn.PARTITION_NAME: "layers"},
    )
    x, per_layer = stacked(
        **self.layer_fields(), deterministic=deterministic,
        emit_hidden_state=output_hidden_states, decode=decode,
        name="layers")(x, mask, bias, positions, *self._layer_indices())
    return x, per_layer

  def _layer_indices(self) -> tuple:
    """Scanned per-layer input: the layer's index (sparse patterns differ per layer)."""
    if self.attention_spec is None:
      return ()
    return (jnp.arange(self.num_layers, dtype=jnp.int32),)
