"""The small Transformer student: single sentences and pairs read as two segments, padding
that changes nothing, the word embedding where the checkpoint looks for it, bad shapes."""
import flax.linen as nn
import jax
import numpy as np
import pytest

from bertjax.distill import student_checkpoint
from bertjax.models.word_transformer import WordTransformerClassifier, WordTransformerConfig

CONFIG = dict(vocab_size=30, hidden_size=16, num_layers=1, num_heads=2, intermediate_size=32,
              max_length=8, hidden_dropout=0.0)


def _apply(config, ids):
  module = WordTransformerClassifier(config)
  params = nn.unbox(jax.jit(module.init)(jax.random.key(0), ids)["params"])
  return params, jax.jit(lambda x: module.apply({"params": params}, x))


def test_single_sentences_ignore_padding_and_pairs_are_one_sequence_of_two_segments():
  config = WordTransformerConfig(**CONFIG)
  ids = np.array([[5, 6, 7, 0, 0, 0], [8, 9, 0, 0, 0, 0]], np.int32)
  params, forward = _apply(config, ids)
  logits = forward(ids)["logits"]
  assert logits.shape == (2, 2)
  np.testing.assert_allclose(forward(ids[:, :3])["logits"], logits, atol=1e-5)
  pair = WordTransformerConfig(**CONFIG, pair=True)
  pairs = np.stack([ids, ids[::-1]], axis=1)  # [2, 2, 6]
  params, forward = _apply(pair, pairs)
  out = forward(pairs)
  assert out["logits"].shape == (2, 2) and out["sentence"].shape == (2, 16)
  # The segments tell the sentences apart: swapping them changes the logits.
  assert not np.allclose(forward(pairs[:, ::-1])["logits"], out["logits"], atol=1e-4)
  assert params["encoder"]["embeddings"]["position_embeddings"]["embedding"].shape == (16, 16)
  student = student_checkpoint.Student(pair, params, None, {})
  assert student.family == "transformer"
  assert student_checkpoint.embedding_params(student) == 30 * 16


def test_bad_shapes_and_sizes_fail_naming_the_layout():
  with pytest.raises(ValueError, match=r"\[batch, 2, length\] \(a sentence pair\)"):
    _apply(WordTransformerConfig(**CONFIG, pair=True), np.ones((2, 6), np.int32))
  with pytest.raises(ValueError, match="not a multiple of num_heads"):
    WordTransformerConfig(**{**CONFIG, "num_heads": 3})
