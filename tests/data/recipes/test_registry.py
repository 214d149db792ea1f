"""Task registry and get_dataset: contract features, determinism, resume, static/dynamic."""

import gin
import numpy as np
import pytest
import seqio
import tensorflow as tf

from bertjax.data import feature_converters as fc
from bertjax.data import recipes
from bertjax.data import vocabularies

WORDS = ("the a cat dog sat ran on under mat log big small red blue green and then it was "
         "happy sad day night park tree house bird sang ##s ##ed ##ing . ,").split()
DOCS = ["The cat sat on the mat.\nThe dog ran under the log.\nIt was a big red day.",
        "A bird sang in the tree.\nThen the night was blue.\nThe house was small and green.\n"
        "The park was happy.",
        "",  # empty: dropped
        "The small cat.",  # one sentence: dropped by pair tasks
        "The dogs ran.\nThe birds sang.\nIt was a sad night and a happy day."] * 3
ENCODER = {"input_ids", "token_type_ids", "attention_mask", "position_ids", "segment_ids",
           "mlm_targets", "mlm_weights"}


@pytest.fixture(scope="module")
def vocab(tmp_path_factory):
  path = tmp_path_factory.mktemp("vocab") / "vocab.txt"
  path.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + WORDS) + "\n")
  return vocabularies.WordPieceVocabulary(str(path))


@pytest.fixture(scope="module")
def source():
  return seqio.FunctionDataSource(
      lambda split, shuffle_files, seed=None: tf.data.Dataset.from_tensor_slices({"text": DOCS}),
      splits=["train"])


def batches(n, **kwargs):
  return list(recipes.get_dataset(**kwargs).take(n).as_numpy_iterator())


def assert_same(a, b):
  assert len(a) == len(b)
  for x, y in zip(a, b):
    assert x.keys() == y.keys()
    for k in x:
      np.testing.assert_array_equal(x[k], y[k])


def test_unknown_task_lists_the_registered_ones():
  with pytest.raises(ValueError, match="registered tasks: .*bert_mlm_nsp.*roberta_mlm"):
    recipes.get_task("bert_mlm_nspp")
  assert {"bert_mlm_nsp", "roberta_mlm", "albert_mlm_sop", "spanbert",
          "electra"} <= set(recipes.registered())


def test_roberta_mlm_contract_determinism_and_resume(vocab, source):
  args = dict(task_name="roberta_mlm", sequence_length=24, batch_size=2, seed=3,
              vocabulary=vocab, source=source)
  first = batches(4, **args)
  b = first[0]
  assert set(b) == ENCODER
  for k, v in b.items():
    assert v.shape == (2, 24) and v.dtype == (np.float32 if k == "mlm_weights" else np.int32)
  assert (b["input_ids"][b["attention_mask"] == 0] == vocab.pad_id).all()
  # A rebuilt pipeline resumed at step 2 continues the first one exactly.
  assert_same(first[2:], batches(2, start_step=2, **args))
  # Special / pad tokens are never MLM targets.
  targets = b["mlm_targets"][b["mlm_weights"] > 0]
  assert not np.isin(targets, sorted(vocab.special_ids)).any()


@pytest.mark.slow
def test_hosts_read_different_shards(vocab, source):
  args = dict(task_name="roberta_mlm", sequence_length=24, batch_size=2, seed=3,
              vocabulary=vocab, source=source, shuffle=False, num_epochs=1)
  shard0 = batches(100, shard_id=0, num_shards=2, **args)
  shard1 = batches(100, shard_id=1, num_shards=2, **args)
  everything = batches(100, **args)
  rows = lambda bs: sum(len(b["input_ids"]) for b in bs)
  assert shard0 and shard1 and rows(shard0) + rows(shard1) >= rows(everything) - 2
  assert not np.array_equal(shard0[0]["input_ids"], shard1[0]["input_ids"])


def _epochs(name, vocab, source, **kwargs):
  args = dict(task_name=name, sequence_length=24, batch_size=1, seed=0, shuffle=False,
              vocabulary=vocab, source=source, **kwargs)
  both = list(recipes.get_dataset(num_epochs=2, **args).as_numpy_iterator())
  n = len(both) // 2
  return both[:n], both[n:]


def test_bert_static_masks_repeat_and_roberta_dynamic_masks_change(vocab, source):
  with gin.unlock_config():
    gin.bind_parameter("bertjax.data.recipes.encoder.bert_preprocessors.dupe_factor", 2)
    # DOC-SENTENCES keeps epochs aligned (FULL-SENTENCES streams across them).
    gin.bind_parameter("roberta_preprocessors.cross_documents", False)
  try:
    one, two = _epochs("bert_mlm_nsp", vocab, source)
    dyn_one, dyn_two = _epochs("roberta_mlm", vocab, source, pack=False)
  finally:
    gin.clear_config()
  assert_same(one, two)
  assert {"next_sentence_label"} | ENCODER == set(one[0])
  labels = [b["next_sentence_label"][0] for b in one]
  assert 0 in labels and 1 in labels
  one, two = dyn_one, dyn_two
  original = lambda b: np.where(b["mlm_weights"] > 0, b["mlm_targets"], b["input_ids"])
  assert all(np.array_equal(original(x), original(y)) for x, y in zip(one, two))
  assert not all(np.array_equal(x["mlm_weights"], y["mlm_weights"]) for x, y in zip(one, two))


@pytest.mark.slow
@pytest.mark.parametrize("name,extra", [("albert_mlm_sop", {"next_sentence_label"}),
                                        ("spanbert", {"sbo_left", "sbo_right", "sbo_pos"}),
                                        ("electra", set())])
def test_other_tasks_emit_their_features(vocab, source, name, extra):
  (b,) = batches(1, task_name=name, sequence_length=32, batch_size=2, seed=1,
                 vocabulary=vocab, source=source)
  assert set(b) == ENCODER | extra
  assert b["mlm_weights"].sum() > 0
  if name == "electra":  # 85% [MASK] / 15% kept, never random
    sel = b["mlm_weights"] > 0
    assert np.isin(b["input_ids"][sel], [vocab.mask_id] + list(b["mlm_targets"][sel])).all()


@pytest.mark.slow
def test_register_objective_hook_for_encoder_decoder(vocab, source):
  def tokenize(dataset):
    return dataset.map(lambda ex: {"inputs": vocab.encode_tf(ex["text"]),
                                   "targets": vocab.encode_tf(ex["text"])[:4]}).filter(
                                       lambda ex: tf.size(ex["targets"]) > 0)

  recipes.register(
      "toy_copy", preprocessors=lambda v: [tokenize],
      features={"inputs": (tf.int32, 1), "targets": (tf.int32, 1)},
      converter=lambda v, pack: fc.EncDecFeatureConverter(pack=pack, pad_id=v.pad_id),
      sequence_lengths=lambda n: {"inputs": n, "targets": n // 4})
  try:
    (b,) = batches(1, task_name="toy_copy", sequence_length=48, batch_size=2,
                   vocabulary=vocab, source=source)
    assert b["input_ids"].shape == (2, 48) and b["labels"].shape == (2, 12)
    assert "encoder_segment_ids" in b and "decoder_position_ids" in b
  finally:
    recipes.unregister("toy_copy")
