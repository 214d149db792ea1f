"""Pooling and the tied-weight siamese wrapper (bertjax/sbert/model.py)."""
import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from bertjax.models import bert
from bertjax.sbert import model as sbert


def _padded(lengths, hidden=4, seed=0):
  rng = np.random.default_rng(seed)
  states = rng.normal(size=(len(lengths), max(lengths), hidden)).astype(np.float32)
  mask = (np.arange(max(lengths))[None] < np.array(lengths)[:, None]).astype(np.int32)
  return states, mask


def test_pool_matches_numpy_reference():
  states, mask = _padded([5, 2, 1])
  for i, n in enumerate([5, 2, 1]):
    real = states[i, :n]
    np.testing.assert_allclose(sbert.pool(states, mask, "mean")[i], real.mean(0), rtol=1e-6)
    np.testing.assert_allclose(sbert.pool(states, mask, "max")[i], real.max(0), rtol=1e-6)
    np.testing.assert_array_equal(sbert.pool(states, mask, "cls")[i], real[0])


def test_pool_rejects_unknown_mode():
  with pytest.raises(ValueError, match="Unknown pooling 'avg'"):
    sbert.pool(np.zeros((1, 2, 3)), np.ones((1, 2)), "avg")


@settings(max_examples=15, deadline=None)
@given(st.lists(st.integers(1, 6), min_size=1, max_size=5), st.sampled_from(sbert.POOLING_MODES))
def test_pool_segments_equals_pooling_each_sentence_alone(lengths, mode):
  """Packing sentences into one row then pooling per segment = pooling them one by one."""
  states, mask = _padded(lengths)
  row = np.concatenate([states[i, :n] for i, n in enumerate(lengths)])[None]
  segments = np.concatenate([np.full(n, i + 1) for i, n in enumerate(lengths)])[None]
  row = np.pad(row, ((0, 0), (0, 3), (0, 0)))  # trailing padding, segment 0
  segments = np.pad(segments, ((0, 0), (0, 3)))
  packed = sbert.pool_segments(row, segments, len(lengths) + 2, mode)
  # Summation order differs (segment sums vs a masked row sum): float32 round-off only.
  np.testing.assert_allclose(packed[0, :len(lengths)], sbert.pool(states, mask, mode), rtol=1e-6,
                             atol=1e-7)


def _tiny_encoder():
  cfg = bert.bert_tiny(vocab_size=50, max_position_embeddings=16)
  return bert.BertModel(cfg, add_pooling_layer=False)


def test_siamese_weights_are_tied_and_match_sentence_encoder():
  encoder = _tiny_encoder()
  model = sbert.SiameseModel(encoder, pooling="mean", normalize=True, num_labels=3)
  rng = np.random.default_rng(0)
  ids = jnp.asarray(rng.integers(5, 50, (2, 2, 6)), jnp.int32)
  mask = jnp.asarray([[[1] * 6, [1] * 3 + [0] * 3], [[1] * 4 + [0] * 2, [1] * 6]], jnp.int32)
  params = nn.unbox(model.init(jax.random.PRNGKey(0), ids, mask)["params"])
  assert sorted(params) == ["classifier", "encoder"]  # one encoder for every sentence
  out = model.apply({"params": params}, ids, mask)

  single = sbert.SentenceEncoder(encoder, "mean", normalize=True)
  for s in range(2):
    alone = single.apply({"params": {"encoder": params["encoder"]}}, ids[:, s], mask[:, s])
    np.testing.assert_allclose(out["embeddings"][:, s], alone["sentence_embedding"], atol=1e-6)
  np.testing.assert_allclose(np.linalg.norm(out["embeddings"], axis=-1), 1.0, rtol=1e-5)

  u, v = out["embeddings"][:, 0], out["embeddings"][:, 1]
  head = params["classifier"]
  expected = jnp.concatenate([u, v, jnp.abs(u - v)], -1) @ head["kernel"] + head["bias"]
  np.testing.assert_allclose(out["logits"], expected, atol=1e-5)


def test_siamese_requires_stacked_sentences():
  model = sbert.SiameseModel(_tiny_encoder())
  with pytest.raises(ValueError, match=r"\[batch, sentences, length\]"):
    model.init(jax.random.PRNGKey(0), jnp.ones((2, 5), jnp.int32))


def test_sentence_encoder_packed_needs_segment_ids():
  model = sbert.SentenceEncoder(_tiny_encoder())
  ids = jnp.ones((1, 4), jnp.int32)
  params = nn.unbox(model.init(jax.random.PRNGKey(0), ids)["params"])
  with pytest.raises(ValueError, match="segment_ids is missing"):
    model.apply({"params": params}, ids, num_segments=2)
