"""The recipes only the paper tables use: `bert_mlm` (BERT Table 5's "No NSP": BERT's segment
pairs in order, static masks, no label) and `bert_mlm_nsp_dynamic` (RoBERTa Tables 1-2)."""
import gin
import numpy as np
import pytest
import seqio
import tensorflow as tf

from bertjax.data import recipes, vocabularies

WORDS = "the a cat dog sat ran on mat log big red day it was and . one two three four".split()
DOCS = ["The cat sat on the mat.\nThe dog ran on the log.\nIt was a big red day.\n"
        "One two three four.\nThe cat was red."] * 4


@pytest.fixture(scope="module")
def data(tmp_path_factory):
  path = tmp_path_factory.mktemp("vocab") / "vocab.txt"
  path.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + WORDS) + "\n")
  source = seqio.FunctionDataSource(
      lambda split, shuffle_files, seed=None: tf.data.Dataset.from_tensor_slices(
          {"text": DOCS}), splits=["train"])
  return {"vocabulary": vocabularies.WordPieceVocabulary(str(path)), "source": source}


def two_epochs(name, data):
  both = list(recipes.get_dataset(name, sequence_length=24, batch_size=1, seed=0,
                                  shuffle=False, num_epochs=2, **data).as_numpy_iterator())
  return both[:len(both) // 2], both[len(both) // 2:]


def test_no_nsp_segments_follow_each_other_and_masks_repeat(data):
  vocab = data["vocabulary"]
  one, two = two_epochs("bert_mlm", data)
  assert one and "next_sentence_label" not in one[0]
  for x, y in zip(one, two):  # static: the same pairs and masks every epoch
    for k in x:
      np.testing.assert_array_equal(x[k], y[k])
  text = " ".join(str(i) for i in vocab.encode(" ".join(DOCS[0].split("\n")) * 2))
  for b in one:
    ids = np.where(b["mlm_weights"][0] > 0, b["mlm_targets"][0], b["input_ids"][0])
    real = ids[b["attention_mask"][0] > 0]
    assert real[0] == 2 and real[-1] == 3 and (real == 3).sum() == 2  # [CLS] A [SEP] B [SEP]
    a_and_b = " ".join(str(i) for i in real if i not in (2, 3))
    assert a_and_b in text  # B is the text right after A


def test_dynamic_pairs_are_redrawn_and_sentence_pairs_are_single_sentences(data):
  one, two = two_epochs("bert_mlm_nsp_dynamic", data)
  assert "next_sentence_label" in one[0]
  assert not all(np.array_equal(x["input_ids"], y["input_ids"]) for x, y in zip(one, two))
  with gin.unlock_config():
    gin.bind_parameter("bertjax.data.recipes.encoder.bert_preprocessors.unit", "sentence")
  try:
    pairs, _ = two_epochs("bert_mlm_nsp_dynamic", data)
  finally:
    gin.clear_config()
  sentences = {" ".join(str(i) for i in data["vocabulary"].encode(s))
               for d in DOCS for s in d.split("\n")}
  for b in pairs:
    ids = np.where(b["mlm_weights"][0] > 0, b["mlm_targets"][0], b["input_ids"][0])
    real = list(ids[b["attention_mask"][0] > 0])
    cut = real.index(3)
    assert " ".join(map(str, real[1:cut])) in sentences            # A: one sentence
    assert " ".join(map(str, real[cut + 1:-1])) in sentences       # B: one sentence
