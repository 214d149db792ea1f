"""Feature-based mode: layer choices, extraction at first pieces, the tagger."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bertjax.finetune import feature_based as fb
from bertjax.models import bert

CFG = bert.BertConfig(vocab_size=40, num_layers=4, hidden_size=16, num_heads=2,
                      intermediate_size=32, max_position_embeddings=16)


def test_layer_choices_follow_table_7():
  assert fb.layers_for("embeddings", 7) == [0]
  assert fb.layers_for("last", 7) == [6] and fb.layers_for("second_last", 7) == [5]
  assert fb.layers_for("sum_last4", 7) == fb.layers_for("concat_last4", 7) == [3, 4, 5, 6]
  assert fb.layers_for("sum_all", 7) == list(range(7))
  with pytest.raises(ValueError, match="needs 4 layers"):
    fb.layers_for("concat_last4", 3)
  with pytest.raises(ValueError, match="Unknown feature mode"):
    fb.layers_for("max", 7)


def test_extract_reads_every_layer_at_first_pieces():
  encoder = bert.BertModel(CFG)
  params = bert.init_params(encoder, jax.random.key(0))
  ids = np.array([[1, 5, 6, 7, 2, 0], [1, 8, 2, 0, 0, 0]], np.int32)
  arrays = {"input_ids": ids, "attention_mask": (ids > 0).astype(np.int32),
            "token_type_ids": np.zeros_like(ids),
            "first_piece": np.array([[1, 3], [1, -1]], np.int32)}
  states = fb.extract(encoder, params, arrays, batch_size=2)
  assert states.shape == (2, 2, 5, 16) and states.dtype == np.float16
  hidden = encoder.apply({"params": params}, jnp.asarray(ids), jnp.asarray(arrays["attention_mask"]),
                         output_hidden_states=True)["hidden_states"]
  np.testing.assert_allclose(states[0, 1], np.asarray(hidden[:, 0, 3]), atol=2e-2)
  assert not states[1, 1].any()  # a word without a first piece gets zeros


@pytest.mark.parametrize("mode", fb.MODES)
def test_tagger_per_mode(mode):
  states = np.random.default_rng(0).normal(size=(3, 5, 5, 16)).astype(np.float16)
  first_piece = np.array([[1, 2, 4, -1, -1], [1, 2, 3, 4, 5], [1, -1, -1, -1, -1]], np.int32)
  labels = np.zeros((3, 8), np.int32)
  labels[1, 3] = 4
  arrays = fb.word_arrays(states, first_piece, labels, mode)
  assert arrays["labels"][1].tolist() == [0, 0, 4, 0, 0]
  assert arrays["attention_mask"].sum(1).tolist() == [3, 5, 1]
  tagger = fb.FeatureTagger(mode, num_labels=9, lstm_size=8, lstm_layers=1)
  inputs = fb.WordTagging().model_inputs({k: jnp.asarray(v) for k, v in arrays.items()})
  params = jax.eval_shape(lambda: tagger.init(jax.random.key(0), **inputs)["params"])
  logits = jax.eval_shape(lambda p: tagger.apply({"params": p}, **inputs), params)["logits"]
  assert logits.shape == (3, 5, 9)
  width = {"concat_last4": 64}.get(mode, 16)
  assert params["lstm_0_forward"]["ii"]["kernel"].shape[0] == width
  assert set(params) >= {"lstm_0_backward", "out"}


def test_scalar_mix_starts_as_the_mean():
  x = jnp.arange(24.0).reshape(1, 1, 4, 6)
  mix = fb.ScalarMix()
  out = mix.apply(mix.init(jax.random.key(0), x), x)
  np.testing.assert_allclose(out, x.mean(2), rtol=1e-6)
