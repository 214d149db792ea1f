"""The generation loops: greedy decoding, sampling and beam search as `lax.while_loop`s,
following transformers' `generate` step for step (same token ids)."""
from typing import Optional

import jax
import jax.numpy as jnp

from bertjax.inference import runners
from bertjax.inference.config import GenerationConfig

_NEG = -1.0e9  # transformers' beam search excludes candidates by adding this


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

def greedy_or_sample(runner, cfg: GenerationConfig, params, input_ids, attention_mask, rng):
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
  prompt = 1 if isinstance(runner, runners.EncoderDecoder) else input_ids.shape[1]
  return prompt + cfg.max_new_tokens


# ----------------------------------------------------------------------------------------
# Beam search, transformers' vectorized algorithm (2 * num_beams candidates per step).

def _take(x, indices):
  """x [B, n, ...] gathered at indices [B, m] along axis 1."""
  return jnp.take_along_axis(x, indices.reshape(indices.shape + (1,) * (x.ndim - 2)), axis=1)


def beam_search(runner, cfg: GenerationConfig, params, input_ids, attention_mask, rng):
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
    context_axes, axes = runners.cache_batch_axes(make)
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
      cache = runners.reorder_cache(cache, axes, flat_parents)
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
