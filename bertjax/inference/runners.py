"""How a model is run step by step: decoder-only or encoder-decoder, with its caches.

The cache protocol (what a model implements to be decoded here)
---------------------------------------------------------------
* Self-attention that should be cached is `MultiHeadAttention(..., decode=True)`
  (bertjax.layers.kv_cache): it keeps `cached_key`, `cached_value` [B, cache_length,
  heads, kv] and `cache_index` in the 'cache' collection, writes the new tokens' keys and
  values at `cache_index` and masks the slots not filled yet / in a query's future.
  `mask` / `bias` given to it then span the cache: [..., q, cache_length]. Layers stacked
  with `nn.scan` add `"cache": 0` to `variable_axes`.
* Cross-attention that should be cached is `MultiHeadAttention(..., cache_cross_kv=True)`:
  the creating call projects the encoder output to keys/values once per layer into the
  read-only 'cross_cache' collection (`"cross_cache": 0` in a scan's `variable_axes`);
  steps pass it in but do not return it (not `mutable`), so the layer scan does not
  write it back at every step, and beam search never reorders it (it is the same for
  every beam of an example).
* A module that needs the absolute position of the new tokens (learned positions, T5's
  relative bias for query positions start..start+q against all cache slots) calls
  `kv_cache.step_positions(self, q)` -> (start, cache_length) once per step.
* The cache is created by one call with `decode=True` on a full-length input
  ([B, cache_length]); that call writes nothing. `init_cache` below does it abstractly
  (jax.eval_shape) and returns zeros, so creating a cache costs no compute. Encoder-
  decoders run that call for real, on the encoder output, to fill 'cross_cache'; its
  decoder outputs are unused, so XLA drops their computation.
* Decoder-only models (GPT): `module.apply({'params', 'cache'}, input_ids,
  attention_mask=..., position_ids=..., decode=True, mutable=['cache'])` returns
  `{'logits': [B, q, vocab], ...}`. In decode mode `attention_mask` is [B, cache_length]
  (1 = slot holds a real token: left padding of the prompt is 0) and `position_ids` are
  the new tokens' positions [B, q]. The prompt is written in one call (prefill), then
  one token per call.
* Encoder-decoders (T5, BART): `method='encode'`: `encode(input_ids, attention_mask)` ->
  `{'encoder_last_hidden_state': [B, S, H], ...}`; `method='decode'`:
  `decode(decoder_input_ids, encoder_hidden_states, attention_mask, decode=True)` ->
  `{'logits': [B, q, vocab], ...}` (attention_mask is the encoder's padding mask;
  encoder_hidden_states is None once 'cross_cache' holds the keys/values). With
  `decode=False` the same method is the full causal decoder (the uncached path).
* Beam search reorders every cache array along its batch axis, found by comparing the
  cache's shapes at two batch sizes; scalars such as `cache_index` are shared by all
  beams (they advance in lock step).
"""
from typing import Any, Callable, Optional

import jax
import jax.numpy as jnp

from bertjax.inference.config import GenerationConfig
from bertjax.layers import kv_cache

Cache = Any


def init_cache(apply_fn: Callable[..., Any], *args, **kwargs) -> Cache:
  """An empty cache: `apply_fn(*args, mutable=['cache'], **kwargs)` (a `decode=True`
  call on full-length inputs) is run abstractly and its 'cache' collection returned as
  zeros."""
  _, variables = jax.eval_shape(lambda: apply_fn(*args, mutable=["cache"], **kwargs))
  return jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), variables["cache"])


def cache_batch_axes(make_cache: Callable[[int], Cache]) -> Any:
  """For each leaf of a cache (or any pytree), its batch axis (or -1 when it has none),
  from the abstract results `make_cache(1)` and `make_cache(2)` of two batch sizes."""
  one, two = (jax.eval_shape(lambda: make_cache(b)) for b in (1, 2))

  def axis(a, b):
    diff = [i for i, (x, y) in enumerate(zip(a.shape, b.shape)) if x != y]
    return diff[0] if diff else -1
  return jax.tree.map(axis, one, two)


def reorder_cache(cache: Cache, axes: Any, indices: jax.Array) -> Cache:
  """Gathers `indices` (flat beam indices [B * beams]) along each leaf's batch axis."""
  return jax.tree.map(lambda x, a: x if a < 0 else jnp.take(x, indices, axis=a), cache, axes)


# ----------------------------------------------------------------------------------------
# Settings.


class DecoderOnly:
  """GPT-style: the prompt is the start of the sequence (left-padded in a batch)."""

  def __init__(self, module):
    self.module = module

  def prepare(self, params, input_ids, attention_mask, total: int, cfg: GenerationConfig):
    del params, cfg
    batch, prompt = input_ids.shape
    key_mask = jnp.concatenate(
        [attention_mask.astype(jnp.int32), jnp.ones((batch, total - prompt), jnp.int32)], axis=1)
    # Positions count real tokens only, as transformers derives them from the mask.
    positions = jnp.maximum(jnp.cumsum(key_mask, axis=1) - 1, 0)
    return {"key_mask": key_mask, "positions": positions}, input_ids

  def init_cache(self, params, context, batch: int, total: int) -> tuple[dict, Cache]:
    tokens = jnp.zeros((batch, total), jnp.int32)
    return context, init_cache(self.module.apply, {"params": params}, tokens,
                               attention_mask=tokens, position_ids=tokens, decode=True)

  def logits(self, params, context, cache, tokens, start):
    if cache is None:  # the full sequence, recomputed
      out = self.module.apply({"params": params}, tokens, attention_mask=context["key_mask"],
                              position_ids=context["positions"])
      return out["logits"], None
    positions = jax.lax.dynamic_slice_in_dim(context["positions"], start, tokens.shape[1], axis=1)
    out, variables = self.module.apply(
        {"params": params, "cache": cache}, tokens, attention_mask=context["key_mask"],
        position_ids=positions, decode=True, mutable=["cache"])
    return out["logits"], variables["cache"]


class EncoderDecoder:
  """T5 / BART: encode once; the decoder starts from `decoder_start_token_id`."""

  def __init__(self, module, cache_cross_attention: bool = True):
    self.module = module
    self.cache_cross_attention = cache_cross_attention

  def prepare(self, params, input_ids, attention_mask, total: int, cfg: GenerationConfig):
    del total
    if cfg.decoder_start_token_id is None:
      raise ValueError("An encoder-decoder needs decoder_start_token_id (in its config or as "
                       "an argument to generate).")
    encoded = self.module.apply({"params": params}, input_ids, attention_mask,
                                method="encode")["encoder_last_hidden_state"]
    start = jnp.full((input_ids.shape[0], 1), cfg.decoder_start_token_id, jnp.int32)
    return {"encoded": encoded, "attention_mask": attention_mask}, start

  def init_cache(self, params, context, batch: int, total: int) -> tuple[dict, Cache]:
    """(context, empty self-attention cache); the context's encoder output is replaced by
    its cross-attention keys/values, projected here once."""
    encoded, mask = context["encoded"], context["attention_mask"]
    tokens = jnp.zeros((batch, total), jnp.int32)
    if not self.cache_cross_attention:
      return context, init_cache(self.module.apply, {"params": params}, tokens, encoded, mask,
                                 decode=True, method="decode")
    _, variables = self.module.apply({"params": params}, tokens, encoded, mask, decode=True,
                                     method="decode", mutable=["cache", kv_cache.CROSS_COLLECTION])
    context = {"attention_mask": mask, "cross_cache": variables[kv_cache.CROSS_COLLECTION]}
    return context, variables["cache"]

  def logits(self, params, context, cache, tokens, start):
    del start  # the decoder's own cache tracks positions
    mask = context["attention_mask"]
    if cache is None:
      out = self.module.apply({"params": params}, tokens, context["encoded"], mask,
                              method="decode")
      return out["logits"], None
    variables = {"params": params, "cache": cache}
    if "cross_cache" in context:
      variables[kv_cache.CROSS_COLLECTION] = context["cross_cache"]
    out, variables = self.module.apply(variables, tokens, context.get("encoded"), mask,
                                       decode=True, method="decode", mutable=["cache"])
    return out["logits"], variables["cache"]


def runner(module, cfg: Optional[GenerationConfig] = None):
  if hasattr(module, "encode") and hasattr(module, "decode"):
    return EncoderDecoder(module, cfg is None or cfg.cache_cross_attention)
  return DecoderOnly(module)


# ----------------------------------------------------------------------------------------
# Logits processing, as transformers' processors (forced tokens) and warpers (sampling).
