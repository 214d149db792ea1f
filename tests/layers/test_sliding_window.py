"""The banded sliding-window attention computes what the dense softmax with the window in its
mask computes, padding and packed segments included, without an [L, L] array."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bertjax.layers import attention, sliding_window
from bertjax.layers.long_attention import token_mask

HEADS, DIM = 3, 8


def _inputs(batch, length, seed=0):
  rng = np.random.default_rng(seed)
  return [jnp.asarray(rng.normal(size=(batch, length, HEADS, DIM)), jnp.float32)
          for _ in range(3)]


def _dense(query, key, value, mask, radius):
  probs = attention.attention_probs(query, key, sliding_window.dense_mask(mask, query.shape[1],
                                                                         radius))
  return jnp.einsum("bhqk,bkhd->bqhd", probs, value)


def _banded(query, key, value, mask, radius):
  scaled = query / jnp.sqrt(DIM)
  return sliding_window.banded_attention(scaled, key, value, mask, radius, lambda p: p,
                                         jnp.float32)


@pytest.mark.parametrize("length,radius", [(37, 4), (40, 5), (64, 16), (9, 1), (12, 20)])
def test_banded_equals_dense_with_padding_and_segments(length, radius):
  query, key, value = _inputs(3, length)
  attention_mask = np.ones((3, length), np.int32)
  attention_mask[1, length - length // 3:] = 0   # right padding longer than the window
  segments = np.ones((3, length), np.int32)  # rows 0 and 1: one example each
  cut = length // 2
  segments[2, cut:], segments[2, length - 2:] = 2, 0  # row 2: two packed examples, 2 pads
  mask = token_mask.from_features(jnp.asarray(attention_mask), jnp.asarray(segments))
  np.testing.assert_allclose(_banded(query, key, value, mask, radius),
                             _dense(query, key, value, mask, radius), atol=2e-6)


def test_no_mask_and_a_query_that_sees_nothing():
  """No mask at all; and a padding row whose whole window is padding spreads its weight
  over every key, as the dense softmax does."""
  query, key, value = _inputs(2, 30, seed=1)
  np.testing.assert_allclose(_banded(query, key, value, None, 3),
                             _dense(query, key, value, None, 3), atol=2e-6)
  attention_mask = np.ones((2, 30), np.int32)
  attention_mask[0, 10:] = 0
  mask = token_mask.from_features(jnp.asarray(attention_mask), None)
  banded = _banded(query, key, value, mask, 3)
  np.testing.assert_allclose(banded, _dense(query, key, value, mask, 3), atol=2e-6)
  np.testing.assert_allclose(banded[0, 20], value[0].mean(0), atol=2e-6)


def test_the_banded_program_holds_no_square_array():
  """At 1,024 tokens and a radius of 16 no intermediate of the compiled program has an
  [L, L] extent (the dense form's scores alone would be 1,024 x 1,024 per head)."""
  query, key, value = _inputs(1, 1024)
  hlo = jax.jit(lambda q, k, v: _banded(q, k, v, None, 16)).lower(query, key, value).as_text()
  assert "1024x1024" not in hlo
  dense = jax.jit(lambda q, k, v: _dense(q, k, v, None, 16)).lower(query, key, value).as_text()
  assert "1024x1024" in dense
