"""SBO: the head reads the right boundary vectors and positions; the loss is MLM-style CE."""
import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import tensorflow as tf

from bertjax.data.preprocessors import span_masking
from bertjax.layers import embeddings
from bertjax.models import spanbert
from bertjax.objectives import base, sbo

TINY = spanbert.SpanBertConfig(vocab_size=40, hidden_size=16, num_layers=1, num_heads=2,
                               intermediate_size=24, max_position_embeddings=32,
                               sbo_max_positions=5, sbo_position_size=6)


def positional_hidden(batch: int, length: int) -> jnp.ndarray:
  """hidden[b, l] = (b, l, 0...): a gathered vector names the row it came from."""
  b, l = np.meshgrid(np.arange(batch), np.arange(length), indexing="ij")
  return jnp.asarray(np.stack([b, l, np.zeros_like(l)], -1), jnp.float32)


def test_boundary_vectors_come_from_the_given_positions():
  hidden = positional_hidden(2, 6)
  left = jnp.array([[0, 1, 1, 0, 0, 0], [0, 0, 2, 2, 2, 0]])
  right = jnp.array([[0, 3, 3, 0, 0, 0], [0, 0, 5, 5, 5, 0]])
  got_left, got_right = spanbert.span_boundary_inputs(hidden, left, right)
  np.testing.assert_array_equal(got_left[..., 1], left)
  np.testing.assert_array_equal(got_right[..., 1], right)
  np.testing.assert_array_equal(got_left[..., 0], [[0] * 6, [1] * 6])  # never crosses rows


def test_span_masking_features_point_at_the_unmasked_tokens_around_each_span():
  """With the data layer's real features: x_{s-1} and x_{e+1} are the tokens just
  outside the span that holds the target, and p_i counts from the span's start."""
  ids = tf.constant([2] + list(range(10, 40)) + [3], tf.int32)  # [CLS] 30 words [SEP]
  features = span_masking.span_mask_tokens(ids, tf.constant([4, 2]), mask_id=1, vocab_size=40,
                                           special_ids=[0, 1, 2, 3], rate=0.3)
  weights = features["mlm_weights"].numpy()
  left, right, pos = (features[k].numpy() for k in ("sbo_left", "sbo_right", "sbo_pos"))
  masked = np.flatnonzero(weights)
  assert masked.size >= 5
  hidden = positional_hidden(1, ids.shape[0])
  got_left, got_right = spanbert.span_boundary_inputs(hidden, left[None], right[None])
  rel = spanbert.relative_positions(jnp.asarray(pos), TINY.sbo_max_positions)
  for i in masked:
    s_minus_1, e_plus_1 = int(got_left[0, i, 1]), int(got_right[0, i, 1])
    assert s_minus_1 < i < e_plus_1
    assert weights[s_minus_1] == 0 and weights[e_plus_1] == 0  # boundaries are visible
    assert weights[s_minus_1 + 1:e_plus_1].all()  # ...and the span between is masked
    assert int(rel[i]) == min(i - s_minus_1 - 1, TINY.sbo_max_positions - 1)


def test_relative_positions_are_zero_based_and_clipped():
  np.testing.assert_array_equal(spanbert.relative_positions(jnp.array([1, 2, 5, 9, 0]), 5),
                                [0, 1, 4, 4, 0])


class HeadOverTable(nn.Module):
  """The SBO head with its own tied word-embedding table."""

  @nn.compact
  def __call__(self, hidden, left, right, pos):
    words = embeddings.Embed(TINY.vocab_size, TINY.hidden_size, name="words")
    return spanbert.SpanBoundaryHead(TINY, name="head")(hidden, left, right, pos, words)


def test_head_is_the_two_layer_mlp_over_left_right_position():
  hidden = jax.random.normal(jax.random.PRNGKey(0), (2, 7, 16))
  left = jnp.array([[0, 1, 1, 0, 0, 0, 0], [0, 0, 0, 3, 3, 3, 0]])
  right = jnp.array([[0, 4, 4, 0, 0, 0, 0], [0, 0, 0, 6, 6, 6, 0]])
  pos = jnp.array([[0, 1, 2, 0, 0, 0, 0], [0, 0, 0, 1, 2, 3, 0]])
  model = HeadOverTable()
  params = nn.unbox(model.init(jax.random.PRNGKey(2), hidden, left, right, pos)["params"])
  params = jax.tree.map(  # non-trivial biases and norms
      lambda x: x + 0.1 * jax.random.normal(jax.random.PRNGKey(1), x.shape), params)
  got = jax.jit(model.apply)({"params": params}, hidden, left, right, pos)

  p = jax.tree.map(np.asarray, params["head"])
  gelu = lambda x: np.asarray(jax.nn.gelu(x, approximate=False))
  norm = lambda x, n: ((x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-12)
                       * p[n]["scale"] + p[n]["bias"])
  h, rows = np.asarray(hidden), np.arange(2)[:, None]
  x = np.concatenate([h[rows, np.asarray(left)], h[rows, np.asarray(right)],
                      p["position_embeddings"]["embedding"][np.clip(np.asarray(pos) - 1, 0, 4)]],
                     -1)
  x = norm(gelu(x @ p["dense1"]["kernel"] + p["dense1"]["bias"]), "norm1")
  x = norm(gelu(x @ p["dense2"]["kernel"] + p["dense2"]["bias"]), "norm2")
  expected = x @ np.asarray(params["words"]["embedding"]).T + p["bias"]
  np.testing.assert_allclose(got, expected, atol=1e-4)


def test_sbo_loss_is_cross_entropy_on_the_masked_positions():
  logits = jax.random.normal(jax.random.PRNGKey(3), (2, 5, 11))
  targets = jnp.array([[0, 4, 5, 0, 0], [0, 0, 7, 8, 0]])
  weights = jnp.array([[0, 1, 1, 0, 0], [0, 0, 1, 1, 0]], jnp.float32)
  batch = {"mlm_targets": targets, "mlm_weights": weights}
  loss, metrics = sbo.SpanBoundary()({"sbo_logits": logits}, batch)
  total, _, count = base.weighted_cross_entropy(logits, targets, weights)
  np.testing.assert_allclose(loss, total / count, rtol=1e-6)
  assert set(metrics) == {"sbo_loss", "sbo_accuracy"} and float(metrics["sbo_loss"][1]) == 4.0


def test_model_inputs_carry_the_sbo_features_and_fail_clearly_without_them():
  batch = {k: np.zeros((1, 4), np.int32) for k in ("input_ids", "attention_mask", "sbo_left",
                                                     "sbo_right", "sbo_pos", "mlm_targets")}
  inputs = sbo.spanbert_pretraining().model_inputs(batch)
  assert set(inputs) == {"input_ids", "attention_mask", "sbo_left", "sbo_right", "sbo_pos"}
  del batch["sbo_pos"]
  with pytest.raises(ValueError, match=r"\['sbo_pos'\]"):
    sbo.SpanBoundary().model_inputs(batch)


def span_batch(seed: int = 0):
  """Two rows of real span-masking features (the 'spanbert' recipe's preprocessor)."""
  rows = []
  for row in range(2):
    ids = tf.constant([2] + list(range(10 + row, 36 + row)) + [3], tf.int32)
    rows.append(span_masking.span_mask_tokens(ids, tf.constant([seed, row]), mask_id=1,
                                              vocab_size=40, special_ids=[0, 1, 2, 3],
                                              rate=0.3))
  batch = {k: jnp.stack([jnp.asarray(r[k].numpy()) for r in rows])
           for k in ("input_ids", "mlm_targets", "mlm_weights", "sbo_left", "sbo_right",
                     "sbo_pos")}
  batch["attention_mask"] = jnp.ones_like(batch["input_ids"])
  return batch


def test_both_heads_at_masked_positions_give_the_full_losses():
  import gin
  model = spanbert.SpanBertForPreTraining(TINY)
  batch = span_batch()
  selected = int(np.asarray(batch["mlm_weights"]).sum(1).max())
  params = spanbert.SpanBertForPreTraining(TINY).init(
      jax.random.PRNGKey(0), **sbo.spanbert_pretraining().model_inputs(batch))["params"]

  def run(max_predictions):
    with gin.unlock_config():
      gin.bind_parameter("MaskedLM.max_predictions", max_predictions)
    objective = sbo.spanbert_pretraining()
    outputs = model.apply({"params": params}, **objective.model_inputs(batch))
    return objective(outputs, batch), outputs

  try:
    (full, full_metrics), full_out = run(None)
    (gathered, metrics), out = run(selected)  # room for every masked token
    (_, short), short_out = run(selected - 2)
  finally:
    gin.clear_config()
  assert selected >= 6 and full_out["sbo_logits"].shape == (2, 28, 40)
  assert out["sbo_logits"].shape == out["prediction_logits"].shape == (2, selected, 40)
  np.testing.assert_allclose(gathered, full, rtol=1e-5)
  for name in ("mlm_loss", "sbo_loss", "sbo_accuracy"):
    np.testing.assert_allclose(metrics[name][0], full_metrics[name][0], rtol=1e-5)
  assert float(metrics["sbo_dropped"][0]) == float(metrics["mlm_dropped"][0]) == 0.0
  # Two positions fewer than the fullest row holds: its last two masked tokens are dropped
  # by both heads alike.
  assert short_out["sbo_logits"].shape == (2, selected - 2, 40)
  assert float(short["sbo_dropped"][0]) == float(short["mlm_dropped"][0]) >= 2.0
  assert float(short["sbo_loss"][1]) == float(short["mlm_loss"][1]) == float(
      np.asarray(batch["mlm_weights"]).sum() - short["mlm_dropped"][0])


def test_a_head_run_at_other_positions_than_its_loss_expects_fails_clearly():
  logits = jnp.zeros((2, 4, 11))  # a head run at 4 positions ...
  batch = {"mlm_targets": jnp.zeros((2, 9), jnp.int32), "mlm_weights": jnp.ones((2, 9))}
  with pytest.raises(ValueError, match=r"max_predictions of every objective"):
    sbo.SpanBoundary()({"sbo_logits": logits}, batch)  # ... scored at all 9
