"""Schedules, the weight-decay mask and the optimizer factories."""
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from bertjax.train import optimizers


def _params():
  # Shaped like a scan-stacked BERT: a LayerNorm scale under `layers` is 2-D.
  return {
      "bert": {
          "embeddings": {"word_embeddings": {"embedding": jnp.ones((10, 4))},
                         "norm": {"norm": {"scale": jnp.ones(4), "bias": jnp.ones(4)}}},
          "encoder": {"layers": {
              "attention": {"query": {"kernel": jnp.ones((2, 4, 4)), "bias": jnp.ones((2, 4))}},
              "attention_norm": {"norm": {"scale": jnp.ones((2, 4)), "bias": jnp.ones((2, 4))}}}},
      },
      "mlm_head": {"bias": jnp.ones(10)},
  }


def test_warmup_linear_decay_matches_bert():
  lr = optimizers.warmup_linear_decay(total_steps=100, peak_value=1e-3, warmup_steps=10)
  np.testing.assert_allclose(lr(0), 0.0)
  np.testing.assert_allclose(lr(5), 5e-4, rtol=1e-6)
  np.testing.assert_allclose(lr(10), 1e-3, rtol=1e-6)
  np.testing.assert_allclose(lr(55), 5e-4, rtol=1e-6)
  np.testing.assert_allclose(lr(100), 0.0, atol=1e-12)


def test_inverse_sqrt_is_t5_schedule():
  lr = optimizers.inverse_sqrt(total_steps=10**6, warmup_steps=10_000)
  np.testing.assert_allclose(lr(0), 0.01, rtol=1e-6)
  np.testing.assert_allclose(lr(10_000), 0.01, rtol=1e-6)
  np.testing.assert_allclose(lr(40_000), 0.005, rtol=1e-6)


def test_warmup_cosine_and_constant():
  lr = optimizers.warmup_cosine_decay(total_steps=20, peak_value=2.0, warmup_steps=10)
  np.testing.assert_allclose([lr(10), lr(20)], [2.0, 0.0], atol=1e-6)
  np.testing.assert_allclose(optimizers.constant(total_steps=5, value=3.0)(4), 3.0)


def test_decay_mask_excludes_biases_and_norms():
  mask = optimizers.decay_mask(_params())
  flat = {optimizers.path_str(p): m for p, m in jax.tree_util.tree_leaves_with_path(mask)}
  assert flat == {
      "bert/embeddings/word_embeddings/embedding": True,
      "bert/embeddings/norm/norm/scale": False,
      "bert/embeddings/norm/norm/bias": False,
      "bert/encoder/layers/attention/query/kernel": True,
      "bert/encoder/layers/attention/query/bias": False,
      "bert/encoder/layers/attention_norm/norm/scale": False,
      "bert/encoder/layers/attention_norm/norm/bias": False,
      "mlm_head/bias": False,
  }


@pytest.mark.parametrize("factory", [optimizers.adamw, optimizers.lamb])
def test_weight_decay_only_touches_masked_params(factory):
  params = _params()
  tx = factory(learning_rate=optax.constant_schedule(0.1), weight_decay=0.5)
  zero_grads = jax.tree.map(jnp.zeros_like, params)
  updates, _ = tx.update(zero_grads, tx.init(params), params)
  new = optax.apply_updates(params, updates)
  mask = optimizers.decay_mask(params)
  for m, p in zip(jax.tree.leaves(mask), jax.tree.leaves(new)):
    if m:
      assert np.all(np.asarray(p) < 1.0)   # decayed towards 0
    else:
      np.testing.assert_array_equal(p, 1.0)  # untouched


def test_adamw_bert_and_roberta_hyperparameters():
  state = optimizers.adamw(learning_rate=optax.constant_schedule(1e-4), b2=0.98).init(_params())
  assert jax.tree.leaves(state)  # builds for the RoBERTa setting
  with pytest.raises(TypeError):
    optimizers.adamw(learning_rate=1e-4, beta2=0.98)  # misspelled knob is an error


def test_make_optimizer_clips_and_freezes():
  params = _params()
  tx, lr = optimizers.make_optimizer(
      total_steps=10, optimizer=optimizers.sgd,
      schedule=lambda total_steps: optax.constant_schedule(1.0),
      clip_grad_norm=1.0, frozen=(r"^bert/embeddings/",))
  grads = jax.tree.map(lambda p: jnp.full_like(p, 100.0), params)
  updates, _ = tx.update(grads, tx.init(params), params)
  trained = [u for path, u in jax.tree_util.tree_leaves_with_path(updates)
             if not optimizers.path_str(path).startswith("bert/embeddings/")]
  frozen = [u for path, u in jax.tree_util.tree_leaves_with_path(updates)
            if optimizers.path_str(path).startswith("bert/embeddings/")]
  np.testing.assert_allclose(float(optax.global_norm(trained)), 1.0, rtol=1e-5)
  assert all(np.all(np.asarray(u) == 0) for u in frozen)
  assert float(lr(3)) == 1.0


@pytest.mark.parametrize("size", [0.0, 1e-3, 0.3, 1.0, 7.0, 1e6, np.inf, np.nan])
def test_clip_by_global_norm_equals_optax_s(size):
  """The one-multiplication clip gives optax's gradients (to rounding) and state, below,
  at and above the threshold and for a zero, Inf or NaN norm."""
  grads = jax.tree.map(lambda p: p * np.float32(size), _params())
  if size == 1.0:  # norm exactly at the threshold
    grads = jax.tree.map(lambda g: g / optax.global_norm(grads), grads)
  ours, theirs = optimizers.clip_by_global_norm(1.0), optax.clip_by_global_norm(1.0)
  (got, got_state), (want, want_state) = (tx.update(grads, tx.init(grads))
                                          for tx in (ours, theirs))
  assert jax.tree.structure(got_state) == jax.tree.structure(want_state)
  for a, b in zip(jax.tree.leaves(got), jax.tree.leaves(want)):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-6, atol=0)
  if np.isfinite(size) and size > 0:
    assert float(optax.global_norm(got)) == pytest.approx(min(1.0, float(
        optax.global_norm(grads))), rel=1e-6)


def test_adafactor_with_inverse_sqrt_steps():
  params = {"w": jnp.ones((256, 256)), "b": jnp.ones(256)}
  tx, _ = optimizers.make_optimizer(total_steps=10, optimizer=optimizers.adafactor,
                                    schedule=optimizers.inverse_sqrt)
  state = tx.init(params)
  grads = jax.tree.map(jnp.ones_like, params)
  updates, _ = tx.update(grads, state, params)
  assert all(np.isfinite(np.asarray(u)).all() for u in jax.tree.leaves(updates))
  # Factored: the 256x256 matrix keeps row + column statistics, not a full matrix.
  sizes = [x.size for x in jax.tree.leaves(state)]
  assert max(sizes) < 256 * 256
