"""`bert_mlm` (BERT Table 5's "No NSP"): BERT's segment pairs in order, static masks, no label."""
import numpy as np
import seqio
import tensorflow as tf

from bertjax.data import recipes, vocabularies

WORDS = "the a cat dog sat ran on mat log big red day it was and . one two three four".split()
DOCS = ["The cat sat on the mat.\nThe dog ran on the log.\nIt was a big red day.\n"
        "One two three four.\nThe cat was red."] * 4


def test_segments_follow_each_other_and_masks_repeat(tmp_path):
  path = tmp_path / "vocab.txt"
  path.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + WORDS) + "\n")
  vocab = vocabularies.WordPieceVocabulary(str(path))
  source = seqio.FunctionDataSource(
      lambda split, shuffle_files, seed=None: tf.data.Dataset.from_tensor_slices(
          {"text": DOCS}), splits=["train"])
  both = list(recipes.get_dataset("bert_mlm", sequence_length=24, batch_size=1, seed=0,
                                  shuffle=False, vocabulary=vocab, source=source,
                                  num_epochs=2).as_numpy_iterator())
  one, two = both[:len(both) // 2], both[len(both) // 2:]
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
