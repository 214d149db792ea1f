"""ELMo's scalar mix: gamma * sum_k softmax(w)_k h_k, optionally over layers normalised by
their mean and variance over the real positions only."""
import jax
import numpy as np
import pytest

from bertjax.models.common.scalar_mix import ScalarMix


def test_mix_is_gamma_times_softmax_weighted_sum():
  x = np.random.default_rng(0).normal(size=(2, 5, 3, 4)).astype(np.float32)  # [B, W, K, H]
  params = {"weights": np.array([0.5, -1.0, 2.0], np.float32), "gamma": np.float32(1.7)}
  got = ScalarMix().apply({"params": params}, x)
  weights = np.exp(params["weights"]) / np.exp(params["weights"]).sum()
  np.testing.assert_allclose(got, 1.7 * np.einsum("bwkh,k->bwh", x, weights), atol=1e-5)
  init = ScalarMix().init(jax.random.key(0), x)["params"]
  np.testing.assert_allclose(ScalarMix().apply({"params": init}, x), x.mean(2), atol=1e-6)


def test_layer_norm_uses_real_positions_only():
  rng = np.random.default_rng(1)
  x = rng.normal(size=(2, 5, 3, 4)).astype(np.float32) * np.array([1, 10, 100])[:, None]
  mask = np.array([[1, 1, 1, 0, 0], [1, 1, 1, 1, 0]])
  x[mask == 0] = 1e3  # padding must not move the statistics
  mix = ScalarMix(layer_norm=True)
  got = mix.apply(mix.init(jax.random.key(0), x, mask), x, mask)
  real = x[mask == 1]  # [real words, K, H]
  mean, std = real.mean(axis=(0, 2)), real.std(axis=(0, 2))
  expected = ((x - mean[:, None]) / std[:, None]).mean(2)
  np.testing.assert_allclose(got[mask == 1], expected[mask == 1], atol=1e-4)
  with pytest.raises(ValueError, match=r"needs a mask of shape \(2, 5\)"):
    mix.apply(mix.init(jax.random.key(0), x, mask), x)
