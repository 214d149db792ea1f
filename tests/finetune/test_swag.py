"""SWAG: 4-way choice features, one sequence per ending."""
import numpy as np
import pytest

from bertjax import paths
from bertjax.evaluation import swag as swag_eval
from bertjax.finetune import swag
from bertjax.finetune.tokenization import WordPiece

VOCAB = paths.data_dir() / "tokenizers" / "bert-base-uncased" / "vocab.txt"


def test_choice_features():
  if not VOCAB.exists():
    pytest.skip("shared data folder absent")
  tok = WordPiece.from_path(str(VOCAB))
  example = swag_eval.SwagExample("A man sits.", "He",
                                  ("reads.", "eats.", "runs away.", "sleeps."), 2, "x:2")
  arrays = swag.convert_examples([example, example], tok, max_length=16)
  assert arrays["input_ids"].shape == (2, 4, 16) and arrays["labels"].tolist() == [2, 2]
  row = arrays["input_ids"][0, 2]
  expected = [tok.cls_id, *tok.encode("A man sits."), tok.sep_id, *tok.encode("He runs away."),
              tok.sep_id]
  np.testing.assert_array_equal(row[:len(expected)], expected)
  n_context = len(tok.encode("A man sits.")) + 2
  assert arrays["token_type_ids"][0, 2, :n_context].sum() == 0
  assert arrays["token_type_ids"][0, 2, n_context:len(expected)].all()
