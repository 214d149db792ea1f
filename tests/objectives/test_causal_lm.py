"""Causal LM objective: next-token targets, and a tiny GPT trained by its gin recipe."""
import jax.numpy as jnp
import numpy as np
import pytest

from bertjax.objectives import causal_lm
from tests.helpers import pretraining as pretraining_helpers


def test_next_token_targets_stay_inside_real_tokens_and_packed_examples():
  batch = {"input_ids": jnp.array([[5, 6, 7, 8, 9, 0], [1, 2, 3, 4, 0, 0]]),
           "attention_mask": jnp.array([[1, 1, 1, 1, 1, 0], [1, 1, 1, 1, 0, 0]]),
           "segment_ids": jnp.array([[1, 1, 1, 2, 2, 0], [1, 1, 1, 1, 0, 0]])}
  targets, weights = causal_lm.next_token_targets(batch)
  np.testing.assert_array_equal(targets[0, :4], [6, 7, 8, 9])
  np.testing.assert_array_equal(weights, [[1, 1, 0, 1, 0, 0], [1, 1, 1, 0, 0, 0]])


def test_loss_uses_explicit_labels_when_given():
  logits = jnp.log(jnp.array([[[0.5, 0.25, 0.25], [0.25, 0.5, 0.25]]]))
  batch = {"input_ids": jnp.array([[0, 0]]), "labels": jnp.array([[0, 2]]),
           "label_weights": jnp.array([[1.0, 1.0]])}
  loss, metrics = causal_lm.CausalLM()({"logits": logits}, batch)
  np.testing.assert_allclose(loss, -(np.log(0.5) + np.log(0.25)) / 2, rtol=1e-6)
  assert metrics["lm_accuracy"][0] == 1.0 and metrics["lm_loss"][1] == 2.0
  assert "token_type_ids" not in causal_lm.CausalLM().model_inputs(
      {"input_ids": 1, "token_type_ids": 0})


@pytest.mark.slow
def test_tiny_gpt_trains_on_the_causal_lm_recipe(tmp_path):
  """runs/pretrain.gin + models/gpt2_small.gin + objectives/causal_lm.gin, shrunk."""
  records = pretraining_helpers.train(
      tmp_path, ["runs/pretrain.gin", "models/gpt2_small.gin", "objectives/causal_lm.gin"],
      [f"build_model.config_overrides = {{{pretraining_helpers.TINY}}}"], steps=40)
  early, late = pretraining_helpers.early_late(records, "lm_loss")
  assert late < early - 0.3, (early, late)
