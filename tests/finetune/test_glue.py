"""GLUE pair features: [CLS] a [SEP] b [SEP], token types, longest-first truncation."""
import numpy as np
import pytest

from bertjax import paths
from bertjax.evaluation import glue as glue_eval
from bertjax.finetune import glue
from bertjax.finetune.tokenization import WordPiece

VOCAB = paths.data_dir() / "tokenizers" / "bert-base-uncased" / "vocab.txt"


@pytest.fixture(scope="module")
def tokenizer():
  if not VOCAB.exists():
    pytest.skip("shared data folder absent")
  return WordPiece.from_path(str(VOCAB))


def test_pair_features_and_longest_first_truncation(tokenizer):
  examples = [glue_eval.PairExample("the cat sat", "a dog", 1, "x:1"),
              glue_eval.PairExample("one two three four five six", "seven", 0, "x:2")]
  arrays = glue.convert_examples(examples, tokenizer, max_length=8)
  cls, sep = tokenizer.cls_id, tokenizer.sep_id
  row0 = [cls, *tokenizer.encode("the cat sat"), sep, *tokenizer.encode("a dog"), sep]
  np.testing.assert_array_equal(arrays["input_ids"][0], row0)
  np.testing.assert_array_equal(arrays["token_type_ids"][0], [0] * 5 + [1] * 3)
  # 5 slots for 6 + 1 tokens: the longer side loses its tail, the short one is kept.
  row1 = [cls, *tokenizer.encode("one two three four"), sep, *tokenizer.encode("seven"), sep]
  np.testing.assert_array_equal(arrays["input_ids"][1], row1)
  assert arrays["attention_mask"].sum() == 16 and arrays["labels"].tolist() == [1, 0]
