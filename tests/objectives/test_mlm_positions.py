"""MaskedLM.max_predictions: logits only at the selected positions, same loss."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bertjax.models import bert, electra
from bertjax.objectives.mlm import MaskedLM

CONFIG = bert.BertConfig(vocab_size=50, hidden_size=32, num_layers=2, num_heads=2,
                         intermediate_size=40, max_position_embeddings=16)


def batch(num_selected_per_row):
  rng = np.random.default_rng(0)
  b, length = len(num_selected_per_row), 16
  weights = np.zeros((b, length), np.float32)
  for row, n in enumerate(num_selected_per_row):
    weights[row, rng.choice(length, n, replace=False)] = 1.0
  return {"input_ids": jnp.asarray(rng.integers(5, 50, (b, length)), jnp.int32),
          "attention_mask": jnp.ones((b, length), jnp.int32),
          "mlm_targets": jnp.asarray(rng.integers(5, 50, (b, length)) * weights, jnp.int32),
          "mlm_weights": jnp.asarray(weights)}


def loss_and_metrics(objective, params, module, features):
  outputs = module.apply({"params": params}, **objective.model_inputs(features))
  return objective(outputs, features), outputs


MASKED_LMS = {"bert": lambda: bert.BertForMaskedLM(CONFIG),
              "electra": lambda: electra.ElectraForMaskedLM(electra.ElectraConfig(
                  vocab_size=50, embedding_size=16, hidden_size=32, num_layers=2, num_heads=2,
                  intermediate_size=40, max_position_embeddings=16))}


@pytest.mark.parametrize("name", sorted(MASKED_LMS))
def test_gathered_loss_equals_full_loss(name):
  module = MASKED_LMS[name]()
  params = bert.init_params(module, jax.random.PRNGKey(0))
  features = batch([3, 1, 4])
  (full, full_metrics), full_out = loss_and_metrics(MaskedLM(logits_key="logits"), params, module, features)
  (gathered, metrics), out = loss_and_metrics(MaskedLM(logits_key="logits", max_predictions=4),
                                              params, module, features)
  assert full_out["logits"].shape == (3, 16, 50) and out["logits"].shape == (3, 4, 50)
  np.testing.assert_allclose(gathered, full, rtol=1e-6)
  np.testing.assert_allclose(metrics["mlm_accuracy"][0], full_metrics["mlm_accuracy"][0])
  assert float(metrics["mlm_loss"][1]) == 8.0 and float(metrics["mlm_dropped"][0]) == 0.0


def test_selected_tokens_beyond_max_predictions_are_counted():
  module = bert.BertForPreTraining(CONFIG)
  params = bert.init_params(module, jax.random.PRNGKey(1))
  (_, metrics), _ = loss_and_metrics(MaskedLM(max_predictions=2), params, module, batch([5, 2]))
  assert float(metrics["mlm_loss"][1]) == 4.0
  assert float(metrics["mlm_dropped"][0]) == 3.0


@pytest.mark.parametrize("max_predictions", [None, 3])
def test_unseen_metrics_leave_out_the_tokens_the_input_shows(max_predictions):
  """A head that copies its input is right at every selected token kept as it was and
  wrong at the others: `mlm_accuracy` counts the copies, `mlm_unseen_accuracy` does not."""
  vocab, mask_id = 12, 3
  ids = np.array([[5, 6, 7, 8, 9, 10]])
  shown = np.array([[mask_id, 6, 11, 8, 9, 10]])  # [MASK], kept, random, then unselected
  weights = np.array([[1.0, 1.0, 1.0, 0.0, 0.0, 0.0]], np.float32)
  features = {"input_ids": jnp.asarray(shown), "mlm_targets": jnp.asarray(ids * weights, jnp.int32),
              "mlm_weights": jnp.asarray(weights)}
  objective = MaskedLM(logits_key="logits", max_predictions=max_predictions)
  inputs = objective.model_inputs(features)
  at = inputs.get("masked_positions", jnp.arange(6)[None])
  copying = 10.0 * jax.nn.one_hot(jnp.take_along_axis(jnp.asarray(shown), at, 1), vocab)
  _, metrics = objective({"logits": copying}, features)
  ratio = lambda k: float(metrics[k][0]) / float(metrics[k][1])
  assert ratio("mlm_accuracy") == pytest.approx(1 / 3)
  assert float(metrics["mlm_unseen_accuracy"][1]) == 2.0 and ratio("mlm_unseen_accuracy") == 0.0
  assert ratio("mlm_unseen_loss") > ratio("mlm_loss")
