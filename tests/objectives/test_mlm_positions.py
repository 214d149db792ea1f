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
