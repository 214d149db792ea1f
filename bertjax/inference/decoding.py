"""Generation with key/value caches: greedy, beam search and sampling.

The generation loops (`generate`) are `lax.while_loop`s over a fixed-size token buffer
[B, prompt + max_new_tokens], jit-compiled once per shape and setting, stopping early
when every sequence (every beam hypothesis set) is done. They follow transformers'
`generate` step for step, so that greedy and beam search return the same token ids.

The cache protocol a model implements to be decoded here is in bertjax.inference.runners.
"""
import functools
from typing import Any, Optional

import jax
import numpy as np

from bertjax.inference import runners, search
from bertjax.inference.config import GenerationConfig, generation_config


@functools.lru_cache(maxsize=32)
def _compiled(module, cfg: GenerationConfig):
  loop = search.beam_search if cfg.num_beams > 1 else search.greedy_or_sample
  return jax.jit(functools.partial(loop, runners.runner(module, cfg), cfg))


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
    `forced_eos_token_id`; by default from `model_config`: a BART config.json's null
    forced_eos_token_id forces nothing, as in transformers), `use_cache` (False recomputes
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
    decoder_prompt = 1 if isinstance(runners.runner(module), runners.EncoderDecoder) else input_ids.shape[1]
    kwargs["max_new_tokens"] = kwargs["max_length"] - decoder_prompt
  cfg = generation_config(model_config, **kwargs)
  if prng_key is None:
    prng_key = jax.random.PRNGKey(0)
  sequences, length = _compiled(module, cfg)(params, input_ids, attention_mask, prng_key)
  return np.asarray(sequences)[:, :int(length)]
