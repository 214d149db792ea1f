"""Incremental decoding with a key/value cache: greedy, beam search and sampling.

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

The generation loops (`generate`) are `lax.while_loop`s over a fixed-size token buffer
[B, prompt + max_new_tokens], jit-compiled once per shape and setting, stopping early
when every sequence (every beam hypothesis set) is done. They follow transformers'
`generate` step for step, so that greedy and beam search return the same token ids.
"""
import dataclasses
import functools
from typing import Any, Callable, Optional, Union

import jax
import jax.numpy as jnp
import numpy as np

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

_NEG = -1.0e9  # transformers' beam search excludes candidates by adding this


@dataclasses.dataclass(frozen=True)
class GenerationConfig:
  """transformers' `generate` arguments of the same names (and defaults, top_k included)."""
  max_new_tokens: int = 20
  num_beams: int = 1
  do_sample: bool = False
  temperature: float = 1.0
  top_k: int = 50
  top_p: float = 1.0
  length_penalty: float = 1.0
  early_stopping: Union[bool, str] = False
  num_return_sequences: int = 1
  eos_token_id: Optional[int] = None
  pad_token_id: Optional[int] = None
  decoder_start_token_id: Optional[int] = None
  forced_bos_token_id: Optional[int] = None
  forced_eos_token_id: Optional[int] = None
  use_cache: bool = True
  # bertjax only: False recomputes encoder-decoders' cross-attention keys/values from the
  # encoder output at every step (the self-attention cache alone; a benchmark baseline).
  cache_cross_attention: bool = True

  def __post_init__(self):
    if self.max_new_tokens < 1:
      raise ValueError(f"max_new_tokens={self.max_new_tokens}; expected at least 1.")
    if self.num_beams < 1 or not 1 <= self.num_return_sequences <= self.num_beams:
      raise ValueError(f"num_beams={self.num_beams}, num_return_sequences="
                       f"{self.num_return_sequences}: expected 1 <= num_return_sequences <= "
                       "num_beams.")
    if self.early_stopping not in (True, False, "never"):
      raise ValueError(f"early_stopping={self.early_stopping!r}; expected True, False or 'never'.")


_FROM_MODEL_CONFIG = ("eos_token_id", "pad_token_id", "decoder_start_token_id",
                      "forced_bos_token_id", "forced_eos_token_id")


def generation_config(model_config: Any = None, **kwargs) -> GenerationConfig:
  """Settings from `kwargs`, token ids not given there taken from the model's config."""
  names = {f.name for f in dataclasses.fields(GenerationConfig)}
  unknown = sorted(set(kwargs) - names - {"max_length"})
  if unknown:
    raise ValueError(f"Unknown generate() arguments {unknown}; supported: {sorted(names)} "
                     "and max_length.")
  for name in _FROM_MODEL_CONFIG:
    if kwargs.get(name) is None and getattr(model_config, name, None) is not None:
      kwargs[name] = getattr(model_config, name)
  kwargs.pop("max_length", None)
  return GenerationConfig(**kwargs)


# ----------------------------------------------------------------------------------------
# How a model is run: decoder-only or encoder-decoder.

class _DecoderOnly:
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


class _EncoderDecoder:
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


def _runner(module, cfg: Optional["GenerationConfig"] = None):
  if hasattr(module, "encode") and hasattr(module, "decode"):
    return _EncoderDecoder(module, cfg is None or cfg.cache_cross_attention)
  return _DecoderOnly(module)


# ----------------------------------------------------------------------------------------
# Logits processing, as transformers' processors (forced tokens) and warpers (sampling).

def _force(scores, token: Optional[int], when):
  if token is None:
    return scores
  only = jnp.full_like(scores, -jnp.inf).at[:, token].set(0.0)
  return jnp.where(when, only, scores)


def process(scores, cur_len, max_length: int, cfg: GenerationConfig) -> jax.Array:
  """Forced BOS at length 1 and forced EOS at the last position (BART's configs)."""
  scores = _force(scores, cfg.forced_bos_token_id, cur_len == 1)
  return _force(scores, cfg.forced_eos_token_id, cur_len == max_length - 1)


def warp(scores: jax.Array, temperature: float = 1.0, top_k: int = 0,
         top_p: float = 1.0) -> jax.Array:
  """Temperature, then top-k, then top-p (nucleus) filtering; filtered tokens get -inf.

  top-k keeps every token tied with the k-th score; top-p keeps the smallest set of most
  likely tokens whose probability reaches `top_p` (always at least one).
  """
  if temperature != 1.0:
    scores = scores / temperature
  if top_k and top_k < scores.shape[-1]:
    kth = jax.lax.top_k(scores, top_k)[0][..., -1:]
    scores = jnp.where(scores < kth, -jnp.inf, scores)
  if top_p < 1.0:
    order = jnp.argsort(scores, axis=-1)                      # ascending
    ascending = jnp.take_along_axis(scores, order, axis=-1)
    cumulative = jnp.cumsum(jax.nn.softmax(ascending, axis=-1), axis=-1)
    remove = (cumulative <= 1.0 - top_p).at[..., -1].set(False)
    remove = jnp.zeros_like(remove).at[
        jnp.arange(scores.shape[0])[:, None], order].set(remove)
    scores = jnp.where(remove, -jnp.inf, scores)
  return scores


# ----------------------------------------------------------------------------------------
# Greedy search and sampling.

def _greedy_or_sample(runner, cfg: GenerationConfig, params, input_ids, attention_mask, rng):
  context, prompt = runner.prepare(params, input_ids, attention_mask,
                                   _total(runner, input_ids, cfg), cfg)
  batch, prompt_len = prompt.shape
  total = prompt_len + cfg.max_new_tokens
  eos = cfg.eos_token_id
  pad = cfg.pad_token_id if cfg.pad_token_id is not None else (eos if eos is not None else 0)
  sequences = jnp.full((batch, total), pad, jnp.int32).at[:, :prompt_len].set(prompt)
  if cfg.use_cache:
    context, cache = runner.init_cache(params, context, batch, total)
    logits, cache = runner.logits(params, context, cache, prompt, 0)
    next_logits = logits[:, -1]
  else:
    cache = None
    next_logits = runner.logits(params, context, None, sequences, 0)[0][:, prompt_len - 1]

  def cond(state):
    i, _, _, _, unfinished = state
    return (i < cfg.max_new_tokens) & jnp.any(unfinished)

  def body(state):
    i, sequences, cache, next_logits, unfinished = state
    position = prompt_len + i
    scores = process(next_logits.astype(jnp.float32), position, total, cfg)
    if cfg.do_sample:
      scores = warp(scores, cfg.temperature, cfg.top_k, cfg.top_p)
      token = jax.random.categorical(jax.random.fold_in(rng, i), scores, axis=-1)
    else:
      token = jnp.argmax(scores, axis=-1)
    token = jnp.where(unfinished, token, pad).astype(jnp.int32)
    sequences = jax.lax.dynamic_update_slice(sequences, token[:, None], (0, position))
    if eos is not None:
      unfinished = unfinished & (token != eos)
    if cfg.use_cache:
      logits, cache = runner.logits(params, context, cache, token[:, None], position)
      next_logits = logits[:, -1]
    else:
      logits = runner.logits(params, context, None, sequences, 0)[0]
      next_logits = jax.lax.dynamic_index_in_dim(logits, position, axis=1, keepdims=False)
    return i + 1, sequences, cache, next_logits, unfinished

  state = (jnp.zeros((), jnp.int32), sequences, cache, next_logits, jnp.ones((batch,), bool))
  steps, sequences, _, _, _ = jax.lax.while_loop(cond, body, state)
  return sequences, prompt_len + steps


def _total(runner, input_ids, cfg: GenerationConfig) -> int:
  prompt = 1 if isinstance(runner, _EncoderDecoder) else input_ids.shape[1]
  return prompt + cfg.max_new_tokens


# ----------------------------------------------------------------------------------------
# Beam search, transformers' vectorized algorithm (2 * num_beams candidates per step).

def _take(x, indices):
  """x [B, n, ...] gathered at indices [B, m] along axis 1."""
  return jnp.take_along_axis(x, indices.reshape(indices.shape + (1,) * (x.ndim - 2)), axis=1)


def _beam_search(runner, cfg: GenerationConfig, params, input_ids, attention_mask, rng):
  beams, eos, penalty = cfg.num_beams, cfg.eos_token_id, cfg.length_penalty
  context, prompt = runner.prepare(params, input_ids, attention_mask,
                                   _total(runner, input_ids, cfg), cfg)
  batch, prompt_len = prompt.shape
  total = prompt_len + cfg.max_new_tokens
  flat_prompt = jnp.repeat(prompt, beams, axis=0)
  # transformers fills with `pad_token_id or eos_token_id`: a pad id of 0 falls to EOS.
  fill = cfg.pad_token_id or (eos if eos is not None else -1)
  keep = 2 * beams
  is_top = jnp.arange(keep) < beams

  running = jnp.full((batch, beams, total), fill, jnp.int32).at[:, :, :prompt_len].set(
      prompt[:, None])
  running_scores = jnp.zeros((batch, beams)).at[:, 1:].set(_NEG)
  if cfg.use_cache:
    # Built (cross-attention keys/values projected) for each example, then copied to its
    # beams once; only the self-attention cache is reordered as beams are chosen.
    make = lambda b: runner.init_cache(
        params, jax.tree.map(lambda x: jnp.repeat(x[:1], b, axis=0), context), b, total)
    context_axes, axes = cache_batch_axes(make)
    context, cache = jax.tree.map(
        lambda x, a: x if a < 0 else jnp.repeat(x, beams, axis=a),
        runner.init_cache(params, context, batch, total), (context_axes, axes))
    logits, cache = runner.logits(params, context, cache, flat_prompt, 0)
    next_logits = logits[:, -1]
  else:
    context = jax.tree.map(lambda x: jnp.repeat(x, beams, axis=0), context)
    cache, axes = None, None
    next_logits = runner.logits(params, context, None, running.reshape(batch * beams, total),
                                0)[0][:, prompt_len - 1]
  state = dict(i=jnp.zeros((), jnp.int32), running=running, running_scores=running_scores,
               sequences=running, scores=jnp.full((batch, beams), _NEG),
               finished=jnp.zeros((batch, beams), bool),
               lengths=jnp.zeros((batch, beams), jnp.int32),
               improvable=jnp.ones((batch, 1), bool), cache=cache, next_logits=next_logits,
               go_on=jnp.ones((), bool))

  def body(s):
    i = s["i"]
    position = prompt_len + i
    log_probs = process(jax.nn.log_softmax(s["next_logits"].astype(jnp.float32)), position,
                        total, cfg)
    if cfg.do_sample:
      log_probs = warp(log_probs, cfg.temperature, cfg.top_k, cfg.top_p)
    vocab = log_probs.shape[-1]
    accumulated = (log_probs.reshape(batch, beams, vocab)
                   + s["running_scores"][..., None]).reshape(batch, beams * vocab)
    if cfg.do_sample:  # sampling without replacement: Gumbel top-k
      noise = jax.random.gumbel(jax.random.fold_in(rng, i), accumulated.shape)
      index = jax.lax.top_k(accumulated + noise, keep)[1]
      top_scores = jnp.take_along_axis(accumulated, index, axis=1)
    else:
      top_scores, index = jax.lax.top_k(accumulated, keep)
    source, token = index // vocab, (index % vocab).astype(jnp.int32)
    candidates = jax.lax.dynamic_update_slice(_take(s["running"], source), token[..., None],
                                              (0, 0, position))
    hits = jnp.broadcast_to(position + 1 >= total, token.shape)
    if eos is not None:
      hits = hits | (token == eos)

    # The best `beams` unfinished candidates run on.
    alive = top_scores + hits * _NEG
    chosen = jax.lax.top_k(alive, beams)[1]
    running, running_scores = _take(candidates, chosen), _take(alive, chosen)
    parents = _take(source, chosen)

    # Finished candidates among the top `beams` join the hypotheses if they score better.
    just_finished = hits & is_top[None]
    final = top_scores / ((i + 1).astype(jnp.float32) ** penalty)
    if cfg.early_stopping is True:
      final = final + jnp.all(s["finished"], axis=-1, keepdims=True) * _NEG
    final = final + (~s["improvable"]) * _NEG + (~just_finished) * _NEG
    merged = jnp.concatenate([s["scores"], final], axis=1)
    best = jax.lax.top_k(merged, beams)[1]
    sequences = _take(jnp.concatenate([s["sequences"], candidates], axis=1), best)
    scores = _take(merged, best)
    finished = _take(jnp.concatenate([s["finished"], just_finished], axis=1), best)
    lengths = _take(jnp.concatenate(
        [s["lengths"], jnp.full((batch, keep), i + 1, jnp.int32)], axis=1), best)

    flat_parents = (jnp.arange(batch)[:, None] * beams + parents).reshape(-1)
    cache = s["cache"]
    if cfg.use_cache:
      cache = reorder_cache(cache, axes, flat_parents)
      tokens = jax.lax.dynamic_index_in_dim(running, position, axis=2, keepdims=False)
      logits, cache = runner.logits(params, context, cache, tokens.reshape(-1, 1), position)
      next_logits = logits[:, -1]
    else:
      logits = runner.logits(params, context, None, running.reshape(batch * beams, total), 0)[0]
      next_logits = jax.lax.dynamic_index_in_dim(logits, position, axis=1, keepdims=False)

    # Can a running beam still beat the worst kept hypothesis?
    if cfg.early_stopping == "never" and penalty > 0.0:
      best_length = jnp.float32(total - prompt_len)
    else:
      best_length = (i + 1).astype(jnp.float32)
    best_possible = running_scores[:, :1] / best_length ** penalty
    worst = jnp.where(finished, jnp.min(scores, axis=1, keepdims=True), _NEG)
    improvable = s["improvable"] & jnp.any(best_possible > worst, axis=-1, keepdims=True)
    go_on = jnp.any(improvable) & ~jnp.all(hits)
    if cfg.early_stopping is True:
      go_on = go_on & ~jnp.all(finished)
    return dict(i=i + 1, running=running, running_scores=running_scores, sequences=sequences,
                scores=scores, finished=finished, lengths=lengths, improvable=improvable,
                cache=cache, next_logits=next_logits, go_on=go_on)

  s = jax.lax.while_loop(lambda s: s["go_on"] & (s["i"] < cfg.max_new_tokens), body, state)
  count = cfg.num_return_sequences
  sequences = s["sequences"][:, :count].reshape(batch * count, total)
  return sequences, prompt_len + jnp.max(s["lengths"][:, :count])


# ----------------------------------------------------------------------------------------
# Entry point.

@functools.lru_cache(maxsize=32)
def _compiled(module, cfg: GenerationConfig):
  runner = _runner(module, cfg)
  search = _beam_search if cfg.num_beams > 1 else _greedy_or_sample
  return jax.jit(functools.partial(search, runner, cfg))


def generate(module, params, input_ids, attention_mask=None, *, model_config: Any = None,
             prng_key: Optional[jax.Array] = None, **kwargs) -> np.ndarray:
  """Generates token ids [batch * num_return_sequences, length] like transformers'
  `model.generate(input_ids, attention_mask=..., **kwargs)`.

  module: a decoder-only LM (GPT) or an encoder-decoder with `encode`/`decode` (T5, BART)
    following the cache protocol above. Decoder-only outputs start with the prompt
    (left-pad batched prompts); encoder-decoder outputs start with the decoder start token.
  kwargs: `max_new_tokens` (or `max_length`), `num_beams`, `do_sample`, `temperature`,
    `top_k`, `top_p`, `length_penalty`, `early_stopping`, `num_return_sequences`, token ids
    (`eos_token_id`, `pad_token_id`, `decoder_start_token_id`, `forced_bos_token_id`,
    `forced_eos_token_id`; by default from `model_config`), `use_cache` (False recomputes
    the whole sequence each step), `cache_cross_attention` (False recomputes the
    cross-attention keys/values every step).
  prng_key: the sampling key (the same key gives the same samples).
  """
  # Host arrays in and out: eager jnp ops here would each compile per shape (and slicing
  # the output by its data-dependent length would compile once per length).
  input_ids = np.asarray(input_ids, np.int32)
  if input_ids.ndim != 2:
    raise ValueError(f"input_ids has shape {input_ids.shape}; expected [batch, length].")
  attention_mask = (np.ones_like(input_ids) if attention_mask is None
                    else np.asarray(attention_mask, np.int32))
  if "max_length" in kwargs and "max_new_tokens" not in kwargs:
    decoder_prompt = 1 if isinstance(_runner(module), _EncoderDecoder) else input_ids.shape[1]
    kwargs["max_new_tokens"] = kwargs["max_length"] - decoder_prompt
  cfg = generation_config(model_config, **kwargs)
  if prng_key is None:
    prng_key = jax.random.PRNGKey(0)
  sequences, length = _compiled(module, cfg)(params, input_ids, attention_mask, prng_key)
  return np.asarray(sequences)[:, :int(length)]
