"""Shared checks for the encoder-decoders (T5, BART)."""
import jax
import numpy as np

import bertjax
from bertjax.layers import kv_cache
from tests.helpers import hf, parity


def seq2seq_batch(vocab_size: int, seed: int = 0) -> dict:
  """A padded encoder batch and a padded decoder batch of other lengths."""
  enc = hf.padded_batch(vocab_size, lengths=(11, 7, 3), seed=seed)
  dec = hf.padded_batch(vocab_size, lengths=(5, 9, 2), seed=seed + 1)
  return {"input_ids": enc["input_ids"], "attention_mask": enc["attention_mask"],
          "decoder_input_ids": dec["input_ids"], "decoder_attention_mask": dec["attention_mask"]}


# What every encoder-decoder parity row compares besides its decoder's output.
ENCODER_AND_HIDDEN_STATES = ("encoder_last_hidden_state", "encoder_hidden_states",
                             "decoder_hidden_states")


def parity_batches(vocab_size: int) -> dict:
  """`inputs` / `export_inputs` of an encoder-decoder parity row (seeds 0 and 5)."""
  return {"inputs": [seq2seq_batch(vocab_size)],
          "export_inputs": [seq2seq_batch(vocab_size, seed=5)]}


def cached_vs_full_logits(module, params, input_ids, attention_mask, decoder_input_ids,
                          prompt_length: int = 1):
  """Decoder logits from one full causal pass, and from the key/value caches (self-
  attention, and cross-attention keys/values projected once by the creating call) fed
  `prompt_length` tokens at once and then one token per step. The steps get no encoder
  output, so they can only have used the cached cross-attention keys/values.
  Returns (full, cached)."""
  variables = {"params": params}
  apply = jax.jit(module.apply, static_argnames=("method", "mutable", "decode"))
  encoded = apply(variables, input_ids, attention_mask, method="encode")
  encoded = encoded["encoder_last_hidden_state"]
  full = apply(variables, decoder_input_ids, encoded, attention_mask, method="decode")["logits"]
  # The creating call sizes the (empty) cache from a full-length input.
  _, state = apply(variables, decoder_input_ids, encoded, attention_mask, decode=True,
                   method="decode", mutable=("cache", kv_cache.CROSS_COLLECTION))
  variables = {**variables, kv_cache.CROSS_COLLECTION: state[kv_cache.CROSS_COLLECTION]}
  cache = state["cache"]
  steps = [(0, prompt_length)] + [(t, t + 1) for t in range(prompt_length,
                                                            decoder_input_ids.shape[1])]
  cached = []
  for start, stop in steps:
    out, state = apply({**variables, "cache": cache}, decoder_input_ids[:, start:stop], None,
                       attention_mask, decode=True, method="decode", mutable=("cache",))
    assert set(state) == {"cache"}  # the cross-attention keys/values are read, not returned
    cache = state["cache"]
    cached.append(np.asarray(out["logits"]))
  return np.asarray(full), np.concatenate(cached, axis=1)


def generate_both(torch_model, ours, input_ids, attention_mask, **kwargs):
  """(transformers' generate, bertjax.inference.decoding.generate) token ids for the same
  settings."""
  import torch
  from bertjax.inference import decoding
  start = ours.config.decoder_start_token_id
  with torch.no_grad():
    expected = torch_model.generate(torch.as_tensor(input_ids),
                                    attention_mask=torch.as_tensor(attention_mask),
                                    decoder_start_token_id=start, do_sample=False,
                                    **kwargs).numpy()
  got = decoding.generate(ours.module, ours.params, input_ids, attention_mask,
                          model_config=ours.config, **kwargs)
  return expected, got


def assert_cached_decoding_equals_full(case: parity.Case, tmp_path, prompt_length: int,
                                       decoder_length: int) -> None:
  """The row's model decodes `decoder_length` random tokens with its caches (a prompt of
  `prompt_length`, then one token a step) exactly as in one full pass."""
  ours = bertjax.from_hf(parity.save_reference(case, tmp_path)[1])
  vocab_size = case.config["vocab_size"]
  inputs = seq2seq_batch(vocab_size)
  decoder_ids = np.random.default_rng(0).integers(0, vocab_size, (3, decoder_length))
  full, cached = cached_vs_full_logits(ours.module, ours.params, inputs["input_ids"],
                                       inputs["attention_mask"], decoder_ids, prompt_length)
  np.testing.assert_allclose(cached, full, rtol=0, atol=1e-5)


def assert_generate_equals_reference(case: parity.Case, tmp_path, **settings) -> None:
  """The row's model generates transformers' tokens (8 new ones) for the same settings."""
  torch_model, path = parity.save_reference(case, tmp_path)
  inputs = seq2seq_batch(case.config["vocab_size"], seed=2)
  expected, got = generate_both(torch_model, bertjax.from_hf(path), inputs["input_ids"],
                                inputs["attention_mask"], max_new_tokens=8, **settings)
  np.testing.assert_array_equal(got, expected)
