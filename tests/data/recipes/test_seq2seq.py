"""The T5 / BART / XLNet objectives end to end: text -> registered task -> batches."""
import numpy as np
import pytest
import seqio
import tensorflow as tf

from bertjax.data.recipes import seq2seq as seq2seq_recipes  # pylint: disable=unused-import (registers)
from bertjax.data import recipes

TEXT = [
    "The quick brown fox jumps over the lazy dog.\nIt was not amused by this at all.\n"
    "Then it went back to sleep in the warm afternoon sun.",
    "Pretraining objectives differ in what they hide.\nT5 hides spans of text.\n"
    "BART shuffles sentences and masks spans.\nXLNet predicts tokens in a random order.",
    "",
    "A short one.",
] * 3


def _source(texts):
  return seqio.FunctionDataSource(
      lambda split, shuffle_files, seed=None: tf.data.Dataset.from_tensor_slices({"text": texts}),
      splits=["train"])


def _batches(name, sequence_length, seed=0, n=2, texts=TEXT):
  ds = recipes.get_dataset(name, sequence_length=sequence_length, batch_size=2, seed=seed,
                         source=_source(texts), shuffle=False, num_epochs=1)
  return [{k: v for k, v in b.items()} for b in ds.take(n).as_numpy_iterator()]


def test_all_objectives_are_registered():
  names = set(recipes.registered())
  assert {"t5_span_corruption", "t5_prefix_lm", "t5_bert_style", "t5_deshuffling",
          "t5_mass_style", "t5_iid_replace_spans", "t5_iid_drop_tokens",
          "t5_corruption_rate_50", "t5_span_length_10", "bart_denoising", "xlnet_plm"} <= names


@pytest.mark.parametrize("name", ["t5_span_corruption", "bart_denoising"])
def test_seq2seq_batches(name):
  first = _batches(name, 32)
  assert all(np.array_equal(a[k], b[k]) for a, b in zip(first, _batches(name, 32)) for k in a)
  lengths = seq2seq_recipes.t5_lengths(32) if name.startswith("t5") else {"targets": 32}
  for batch in first:
    assert batch["input_ids"].shape == (2, 32)
    assert batch["labels"].shape == (2, lengths["targets"])
    assert batch["label_weights"].dtype == np.float32 and batch["label_weights"].sum() > 0
    for key in ("decoder_input_ids", "decoder_attention_mask", "encoder_segment_ids",
                "decoder_position_ids"):
      assert key in batch
  vocab = recipes.default_vocabulary()
  if name == "bart_denoising":  # every target row starts with [CLS] (BOS fallback)
    assert (first[0]["labels"][:, 0] == vocab.cls_id).all()
    assert (first[0]["input_ids"] == vocab.mask_id).any()
  else:  # sentinels count down from the top of the vocabulary
    assert (first[0]["input_ids"] == vocab.vocab_size - 1).any()


def test_xlnet_batches():
  # Half of XLNet's B segments are read from the text ahead of every row: more text.
  (batch,) = _batches("xlnet_plm", 48, n=1, texts=TEXT * 4)
  assert batch["perm_mask"].shape == (2, 48, 48) and batch["target_mapping"].shape == (2, 8, 48)
  assert batch["target_ids"].shape == (2, 8) and batch["token_type_ids"].shape == (2, 48)
  assert (batch["target_weights"].sum(1) == 8).all()
  picked = np.einsum("bpl,bl->bp", batch["target_mapping"], batch["input_ids"].astype(np.float32))
  np.testing.assert_array_equal(picked, batch["target_ids"])
