"""Feature converters: packing keeps examples apart and recoverable; enc-dec and XLNet;
every converter writes exactly the batch features of bertjax.batch, with their dtypes."""
import numpy as np
import pytest
import tensorflow as tf

from bertjax import batch as contract
from bertjax.data import feature_converters as fc

L = 16


def assert_contract(row, names):
  """`row` (one example) holds exactly `names`, each with bertjax.batch's dtype and rank."""
  assert sorted(row) == sorted(names)
  for name, value in row.items():
    feature = contract.FEATURES[name]
    assert (value.dtype, value.ndim) == (np.dtype(feature.dtype), feature.rank), name


def encoder_examples(lengths, sbo=False):
  """Example i has tokens 100*i + position (never 0), mixed zeros in other features."""
  exs = []
  for i, n in enumerate(lengths):
    ids = np.arange(n, dtype=np.int32) + 100 * (i + 1)
    weights = (np.arange(n) % 3 == 1).astype(np.float32)
    ex = {"input_ids": ids, "token_type_ids": (np.arange(n) >= n // 2).astype(np.int32),
          "mlm_targets": np.where(weights > 0, ids, 0).astype(np.int32), "mlm_weights": weights}
    if sbo:
      pos = np.arange(n, dtype=np.int32)
      ex.update(sbo_left=np.where(weights > 0, pos - 1, 0).astype(np.int32),
                sbo_right=np.where(weights > 0, np.minimum(pos + 1, n - 1), 0).astype(np.int32),
                sbo_pos=(weights > 0).astype(np.int32))
    exs.append(ex)
  spec = {k: tf.TensorSpec([None], v.dtype) for k, v in exs[0].items()}
  return exs, tf.data.Dataset.from_generator(lambda: iter(exs), output_signature=spec)


def test_packing_never_mixes_examples_and_every_example_is_recoverable():
  # One pipeline over many random lengths (each pipeline costs seconds to trace),
  # with the edges: full rows, single tokens, a window boundary (pack_window=32).
  lengths = list(np.random.RandomState(0).randint(1, L + 1, size=70)) + [L, 1, L, 1]
  exs, ds = encoder_examples(lengths, sbo=True)
  conv = fc.EncoderFeatureConverter(pack=True, sbo=True, pad_id=7, pack_window=32)
  rows = list(conv(ds, conv.task_lengths(L)).as_numpy_iterator())
  assert_contract(rows[0], contract.ENCODER_INPUTS + contract.MLM + contract.SPAN_BOUNDARY)
  recovered = []
  for row in rows:
    seg, pos = row["segment_ids"], row["position_ids"]
    np.testing.assert_array_equal(row["attention_mask"], seg > 0)
    np.testing.assert_array_equal(row["input_ids"][seg == 0], 7)
    for s in range(1, seg.max() + 1):
      idx = np.flatnonzero(seg == s)
      assert (np.diff(idx) == 1).all()  # contiguous
      np.testing.assert_array_equal(pos[idx], np.arange(len(idx)))
      owner = set(row["input_ids"][idx] // 100)
      assert len(owner) == 1  # one example per segment
      example = {k: row[k][idx] for k in exs[0]}
      sel = example["mlm_weights"] > 0
      # SBO boundaries point at row positions inside the same segment.
      for k in ("sbo_left", "sbo_right"):
        assert (seg[row[k][idx][sel]] == s).all()
        example[k] = np.where(sel, row[k][idx] - idx[0], 0)
      recovered.append(example)
  assert len(recovered) == len(exs)
  for got, want in zip(recovered, exs):  # in order
    for k, v in want.items():
      np.testing.assert_array_equal(got[k], v)
  assert len(rows) < 0.8 * len(exs)  # it does pack


def test_unpacked_pads_and_keeps_nsp_label():
  exs, ds = encoder_examples([5, 3])
  ds = ds.map(lambda ex: dict(ex, next_sentence_label=tf.size(ex["input_ids"]) % 2))
  conv = fc.EncoderFeatureConverter(pack=False, nsp=True)
  rows = list(conv(ds, conv.task_lengths(8)).as_numpy_iterator())
  assert [r["next_sentence_label"] for r in rows] == [1, 1]
  assert_contract(rows[0], contract.ENCODER_INPUTS + contract.MLM + contract.SENTENCE_PAIR)
  np.testing.assert_array_equal(rows[0]["attention_mask"], [1] * 5 + [0] * 3)
  np.testing.assert_array_equal(rows[0]["segment_ids"], [1] * 5 + [0] * 3)
  np.testing.assert_array_equal(rows[0]["position_ids"], [0, 1, 2, 3, 4, 0, 0, 0])
  assert rows[0]["mlm_weights"].dtype == np.float32
  with pytest.raises(ValueError, match="pack"):
    fc.EncoderFeatureConverter(pack=True, nsp=True)


@pytest.mark.parametrize("pack", [True, False])
def test_enc_dec_shift_within_examples(pack):
  inputs, targets = [[5, 6, 7], [8, 9]], [[11, 12], [13, 14, 15]]
  ds = tf.data.Dataset.from_tensor_slices(
      {"inputs": tf.ragged.constant(inputs), "targets": tf.ragged.constant(targets)})
  conv = fc.EncDecFeatureConverter(pack=pack, pad_id=1, decoder_start_token_id=2)
  rows = list(conv(ds, conv.task_lengths(8)).as_numpy_iterator())
  assert_contract(rows[0], contract.SEQ2SEQ_TOKENS + contract.TARGETS
                  + (contract.SEQ2SEQ_PACKING if pack else ()))
  if pack:
    (row,) = rows
    np.testing.assert_array_equal(row["input_ids"], [5, 6, 7, 8, 9, 1, 1, 1])
    np.testing.assert_array_equal(row["encoder_segment_ids"], [1, 1, 1, 2, 2, 0, 0, 0])
    np.testing.assert_array_equal(row["decoder_input_ids"], [2, 11, 2, 13, 14, 1, 1, 1])
    np.testing.assert_array_equal(row["decoder_position_ids"], [0, 1, 0, 1, 2, 0, 0, 0])
    np.testing.assert_array_equal(row["labels"][:5], [11, 12, 13, 14, 15])
  else:
    np.testing.assert_array_equal(rows[1]["decoder_input_ids"], [2, 13, 14, 1, 1, 1, 1, 1])
    np.testing.assert_array_equal(rows[1]["label_weights"], [1, 1, 1, 0, 0, 0, 0, 0])
    np.testing.assert_array_equal(rows[1]["attention_mask"], [1, 1, 0, 0, 0, 0, 0, 0])


def test_xlnet_pads_permutation_features():
  n, p = 4, 2
  ex = {"input_ids": np.arange(10, 10 + n, dtype=np.int32),
        "token_type_ids": np.zeros(n, np.int32),
        "perm_mask": np.triu(np.ones((n, n), np.float32)),
        "target_mapping": np.eye(p, n, dtype=np.float32),
        "target_ids": np.array([10, 11], np.int32), "target_weights": np.ones(p, np.float32)}
  ds = tf.data.Dataset.from_tensors(ex)
  conv = fc.XLNetFeatureConverter()
  (row,) = list(conv(ds, conv.task_lengths(6, num_predict=3)).as_numpy_iterator())
  assert_contract(row, contract.PERMUTATION_INPUTS + contract.PERMUTATION_TARGETS)
  np.testing.assert_array_equal(row["input_ids"], [10, 11, 12, 13, 5, 5])
  np.testing.assert_array_equal(row["attention_mask"], [1, 1, 1, 1, 0, 0])
  np.testing.assert_array_equal(row["token_type_ids"][4:], 3)
  assert row["perm_mask"].shape == (6, 6) and (row["perm_mask"][:, 4:] == 1).all()
  np.testing.assert_array_equal(row["perm_mask"][:4, :4], ex["perm_mask"])
  assert row["target_mapping"].shape == (3, 6) and not row["target_mapping"][2].any()
  np.testing.assert_array_equal(row["target_weights"], [1, 1, 0])
  with pytest.raises(ValueError, match="pack"):
    fc.XLNetFeatureConverter(pack=True)
