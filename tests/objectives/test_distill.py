"""Distillation loss math: temperature, the T^2 factor, gradient scale, weights, variants."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
from hypothesis import given, settings, strategies as st

from bertjax.objectives import distill


def logits(seed: int, shape=(3, 5, 11), scale: float = 3.0) -> jnp.ndarray:
  return scale * jax.random.normal(jax.random.PRNGKey(seed), shape)


@pytest.mark.parametrize("temperature", [1.0, 2.0, 4.0])
def test_soft_loss_is_t_squared_kl_as_distilbert_computes_it(temperature):
  s, t = logits(0), logits(1)
  ours = distill.soft_target_loss(s, t, temperature).mean()
  # DistilBERT's distiller: KLDivLoss(batchmean) on rows, times T^2.
  s_t = torch.tensor(np.asarray(s)).reshape(-1, 11)
  t_t = torch.tensor(np.asarray(t)).reshape(-1, 11)
  theirs = torch.nn.KLDivLoss(reduction="batchmean")(
      torch.log_softmax(s_t / temperature, -1), torch.softmax(t_t / temperature, -1))
  np.testing.assert_allclose(ours, theirs.item() * temperature ** 2, rtol=1e-5)


@pytest.mark.parametrize("temperature", [1.0, 3.0, 10.0])
def test_soft_loss_gradient_is_t_times_probability_gap(temperature):
  """d/ds [T^2 KL(p_t || p_s)] = T (softmax(s/T) - softmax(t/T))."""
  s, t = logits(2, (4, 7)), logits(3, (4, 7))
  grad = jax.grad(lambda x: distill.soft_target_loss(x, t, temperature).sum())(s)
  expected = temperature * (jax.nn.softmax(s / temperature) - jax.nn.softmax(t / temperature))
  np.testing.assert_allclose(grad, expected, atol=1e-6)


def test_t_squared_keeps_gradient_scale_independent_of_temperature():
  """Hinton et al. sec. 2.1: at high T the scaled gradient tends to (s - t) / N for
  zero-mean logits, whatever T is - the reason for the T^2 factor."""
  n = 9
  s, t = logits(4, (2, n), 0.5), logits(5, (2, n), 0.5)
  s, t = s - s.mean(-1, keepdims=True), t - t.mean(-1, keepdims=True)
  limit = (s - t) / n
  for temperature in (50.0, 200.0):  # the gap to the limit is O(1 / T)
    grad = jax.grad(lambda x: distill.soft_target_loss(x, t, temperature).sum())(s)
    np.testing.assert_allclose(grad, limit, atol=0.15 / temperature)
  # Without T^2 the gradient would shrink like 1 / T^2.
  g2 = jax.grad(lambda x: distill.soft_target_loss(x, t, 2.0).sum())(s)
  g8 = jax.grad(lambda x: distill.soft_target_loss(x, t, 8.0).sum())(s)
  ratio = float(jnp.linalg.norm(g8) / jnp.linalg.norm(g2))
  assert 0.8 < ratio < 1.25, ratio


@settings(max_examples=20, deadline=None)
@given(st.floats(0.5, 8.0), st.integers(0, 1000))
def test_soft_loss_is_nonnegative_and_zero_at_the_teacher(temperature, seed):
  s, t = logits(seed, (2, 6)), logits(seed + 1, (2, 6))
  assert float(distill.soft_target_loss(s, t, temperature).min()) >= -1e-6
  np.testing.assert_allclose(distill.soft_target_loss(t, t, temperature), 0.0, atol=1e-5)


def test_hard_variant_is_cross_entropy_on_teacher_argmax():
  s, t = logits(6, (5, 8)), logits(7, (5, 8))
  expected = -jax.nn.log_softmax(s)[jnp.arange(5), jnp.argmax(t, -1)]
  np.testing.assert_allclose(distill.hard_target_loss(s, t), expected, rtol=1e-6)


def test_hinton_objective_mixes_soft_and_label_terms_with_alpha():
  s, t = logits(8, (2, 4, 10)), logits(9, (2, 4, 10))
  labels = jax.random.randint(jax.random.PRNGKey(10), (2, 4), 0, 10)
  weights = jnp.array([[1, 1, 0, 0], [1, 0, 1, 0]], jnp.float32)
  batch = {"mlm_targets": labels, "mlm_weights": weights}
  outputs = {"logits": s, "teacher_logits": t}
  objective = distill.Distillation(alpha=0.3, temperature=2.0, label_key="mlm_targets",
                                   weight_key="mlm_weights")
  teacher_only = distill.Distillation(temperature=2.0, weight_key="mlm_weights")
  hard = distill.Distillation(hard=True, weight_key="mlm_weights")
  (loss, metrics), (loss_t, _), (loss_h, _) = jax.jit(
      lambda o, b: (objective(o, b), teacher_only(o, b), hard(o, b)))(outputs, batch)
  mask = np.asarray(weights) > 0
  soft = np.asarray(distill.soft_target_loss(s, t, 2.0))[mask].mean()
  ce = -np.asarray(jnp.take_along_axis(jax.nn.log_softmax(s), labels[..., None], -1))[..., 0][mask]
  np.testing.assert_allclose(loss, 0.3 * soft + 0.7 * ce.mean(), rtol=1e-5)
  assert float(metrics["distill_soft_loss"][1]) == 4.0
  # Teacher-only distillation ignores labels; the hard variant swaps the soft term.
  np.testing.assert_allclose(loss_t, soft, rtol=1e-5)
  np.testing.assert_allclose(
      loss_h, np.asarray(distill.hard_target_loss(s, t))[mask].mean(), rtol=1e-5)


def test_classifier_logits_need_no_weights():
  s, t = logits(11, (6, 3)), logits(12, (6, 3))
  loss, metrics = distill.Distillation(weight_key=None, temperature=1.0)(
      {"logits": s, "teacher_logits": t}, {})
  np.testing.assert_allclose(loss, distill.soft_target_loss(s, t).mean(), rtol=1e-6)
  assert float(metrics["distill_soft_loss"][1]) == 6.0


def test_cosine_loss_bounds():
  same, opposite, scaled = jax.jit(lambda h: (
      distill.cosine_loss(h, h), distill.cosine_loss(h, -h), distill.cosine_loss(h, 5.0 * h)))(
          logits(13, (2, 3, 8)))
  np.testing.assert_allclose(same, 0.0, atol=1e-6)
  np.testing.assert_allclose(opposite, 2.0, atol=1e-6)
  np.testing.assert_allclose(scaled, 0.0, atol=1e-6)


def test_distilbert_triple_loss_weights_its_terms():
  s, t = logits(14, (2, 5, 12)), logits(15, (2, 5, 12))
  hs, ht = logits(16, (2, 5, 8)), logits(17, (2, 5, 8))
  attention = jnp.array([[1, 1, 1, 1, 0], [1, 1, 1, 0, 0]])
  mlm_weights = jnp.array([[0, 1, 0, 0, 0], [0, 0, 1, 0, 0]], jnp.float32)
  batch = {"attention_mask": attention, "mlm_targets": jnp.full((2, 5), 3),
           "mlm_weights": mlm_weights}
  outputs = {"logits": s, "teacher_logits": t, "last_hidden_state": hs,
             "teacher_last_hidden_state": ht}
  alphas = ((5.0, 2.0, 1.0), (1.0, 0.0, 0.0), (0.0, 0.0, 3.0))

  @jax.jit
  def run(outputs, batch):
    results = [distill.DistilBertLoss(alpha_ce=a, alpha_mlm=b, alpha_cos=c)(outputs, batch)
               for a, b, c in alphas]
    return results, distill.DistilBertLoss(ce_on_masked_only=True)(outputs, batch)[1]

  results, masked_only = run(outputs, batch)
  parts = {k: float(v[0] / v[1]) for k, v in results[0][1].items()}
  for (a_ce, a_mlm, a_cos), (loss, _) in zip(alphas, results):
    expected = a_ce * parts["distill_ce_loss"] + a_mlm * parts["mlm_loss"] + a_cos * parts[
        "cos_loss"]
    np.testing.assert_allclose(loss, expected, rtol=1e-5)
  real = np.asarray(attention) > 0
  np.testing.assert_allclose(parts["distill_ce_loss"],
                             np.asarray(distill.soft_target_loss(s, t, 2.0))[real].mean(), rtol=1e-5)
  np.testing.assert_allclose(parts["cos_loss"],
                             np.asarray(distill.cosine_loss(hs, ht))[real].mean(), rtol=1e-5)
  assert float(masked_only["distill_ce_loss"][1]) == 2.0


# ------------------------------------------------ Tang et al. (2019): MSE on logits
STUDENT = np.array([[1.0, -2.0], [0.5, 0.5], [3.0, 1.0]], np.float32)
TEACHER = np.array([[2.0, -1.0], [0.0, 2.0], [3.0, 1.0]], np.float32)


def test_logit_regression_is_the_mean_squared_logit_distance_by_hand():
  # Rows: (1 + 1) = 2, (0.25 + 2.25) = 2.5, 0; mean over rows = 1.5.
  loss, metrics = distill.LogitRegression()({"logits": jnp.asarray(STUDENT)},
                                            {"teacher_logits": jnp.asarray(TEACHER)})
  np.testing.assert_allclose(loss, 1.5, rtol=1e-6)
  np.testing.assert_allclose(metrics["logit_mse"], (4.5, 3.0), rtol=1e-6)
  np.testing.assert_allclose(metrics["teacher_agreement"], (2.0, 3.0))  # row 2 disagrees
  grad = jax.grad(lambda s: distill.LogitRegression()({"logits": s}, {
      "teacher_logits": jnp.asarray(TEACHER)})[0])(jnp.asarray(STUDENT))
  np.testing.assert_allclose(grad, 2 * (STUDENT - TEACHER) / 3, rtol=1e-6)


def test_logit_regression_weights_rows_and_mixes_labels_with_the_papers_alpha():
  labels = jnp.array([0, 1, 1])
  batch = {"teacher_logits": jnp.asarray(TEACHER), "labels": labels,
           "weights": jnp.array([1.0, 1.0, 0.0])}
  ce = -jax.nn.log_softmax(jnp.asarray(STUDENT))[jnp.arange(3), labels]
  loss, metrics = distill.LogitRegression(label_weight=0.25)({"logits": jnp.asarray(STUDENT)},
                                                              batch)
  mse = (2.0 + 2.5) / 2
  np.testing.assert_allclose(loss, 0.75 * mse + 0.25 * (ce[0] + ce[1]) / 2, rtol=1e-6)
  np.testing.assert_allclose(metrics["accuracy"], (1.0, 2.0))
  # label_weight 1: the labels-only baseline, which reads no teacher logits.
  loss, metrics = distill.LogitRegression(label_weight=1.0)(
      {"logits": jnp.asarray(STUDENT)}, {"labels": labels})
  np.testing.assert_allclose(loss, ce.mean(), rtol=1e-6)
  assert "logit_mse" not in metrics
  with pytest.raises(ValueError, match=r"LogitRegression reads batch features \['teacher_logits'\]"):
    distill.LogitRegression()({"logits": jnp.asarray(STUDENT)}, {"labels": labels})
  with pytest.raises(ValueError, match="label_weight"):
    distill.LogitRegression(label_weight=2.0)
