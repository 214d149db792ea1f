"""The analytic FLOPs count: each output scored over the vocabulary is one projection, at
the positions it scores."""
import types

import jax
import numpy as np

from bertjax.train import flops


def test_every_vocabulary_output_counts_one_projection():
  model = types.SimpleNamespace(config=types.SimpleNamespace(num_layers=2, hidden_size=8,
                                                             vocab_size=50))
  params = {"dense": {"kernel": np.zeros((8, 8)), "bias": np.zeros(8)}}
  vocab = jax.ShapeDtypeStruct((1, 16, 50), np.float32)
  count = lambda outputs: flops.for_model(model, params, 16, outputs)
  base = 6 * 64 + 12 * 2 * 8 * 16
  assert count({"last_hidden_state": jax.ShapeDtypeStruct((1, 4, 8), np.float32)}) == base
  assert count({"logits": vocab}) == base + 6 * 50 * 8
  # Two heads over the vocabulary (an MLM and SpanBERT's SBO, a generator and a network).
  assert count({"logits": vocab, "sbo_logits": vocab, "pooler_output": None}) == (
      base + 2 * 6 * 50 * 8)
  # An MLM head run at 4 gathered positions of 16 (max_predictions) projects a quarter.
  gathered = jax.ShapeDtypeStruct((1, 4, 50), np.float32)
  assert count({"prediction_logits": gathered}) == base + 6 * 50 * 8 / 4
