"""Per-row document streams (XLNet's segment recurrence data): the layout itself, and
the xlnet_plm task built on it, decoded back to the source token stream."""
from hypothesis import given, settings, strategies as st
import numpy as np
import pytest
import seqio
import tensorflow as tf

from bertjax.data.recipes import seq2seq as seq2seq_recipes
from bertjax.data import recipes
from bertjax.data.preprocessors import pairs
from bertjax.data.preprocessors import streams
from tests.helpers import xlnet_streams as stream_testlib
from tests.data.test_permutation import check_example

SEP = 1


def reassemble(windows, stride):
  """A row's text from its consecutive windows, checking that they overlap exactly."""
  text = list(windows[0])
  for before, after in zip(windows, windows[1:]):
    overlap = len(before) - stride
    assert list(after[:overlap]) == list(before[stride:]), "window does not continue its row"
    text += list(after[overlap:])
  return text


def split_documents(text, sep=SEP):
  """Row text -> (its finished documents, the started one)."""
  docs, current = [], []
  for token in text:
    if token == sep:
      docs.append(current)
      current = []
    else:
      current.append(token)
  return docs, current


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.integers(2, 50), max_size=30), max_size=40), st.integers(1, 5),
       st.integers(1, 12), st.integers(1, 12))
def test_rows_are_continuous_streams_of_whole_documents(bodies, batch_size, window, stride):
  stride = min(stride, window)
  docs = [[100 + i] + body for i, body in enumerate(bodies)]  # distinct documents
  steps = list(streams.stream_windows(iter(docs), batch_size, window, stride, SEP))
  assert all(len(rows) == batch_size and all(len(w) == window for w in rows) for rows in steps)
  rows = []
  for r in range(batch_size):
    if not steps:
      break
    finished, started = split_documents(reassemble([rows_t[r] for rows_t in steps], stride))
    index = [docs.index(d) for d in finished]  # each one whole source document
    if started:
      index.append(started[0] - 100)
      assert docs[index[-1]][:len(started)] == started
    assert index == sorted(index) and index  # input order, and no row is empty
    rows.append(index)
  # Rows are filled in order at each step; a document lives in exactly one row.
  assert [row[0] for row in rows] == sorted(row[0] for row in rows)
  flat = [i for row in rows for i in row]
  assert len(flat) == len(set(flat)) and (not flat or rows[0][0] == 0)
  # The stream ends at the first step some row cannot fill: more text, more steps.
  assert len(steps) * stride * batch_size <= sum(len(d) + 1 for d in docs)
  longer = docs + [[7] * window] * batch_size
  assert len(list(streams.stream_windows(iter(longer), batch_size, window, stride, SEP))) > \
      len(steps)


def test_row_streams_dataset_is_in_batch_order_and_validates():
  docs = [list(range(10 * k, 10 * k + n)) for k, n in enumerate((5, 9, 3, 9, 7, 4, 8), 1)]
  ds = tf.data.Dataset.from_tensor_slices({"targets": tf.ragged.constant(docs, tf.int32)})
  out = [ex["targets"].tolist() for ex in
         streams.row_streams(ds, batch_size=2, window=6, stride=3, separator_id=SEP)
         .as_numpy_iterator()]
  expected = [w.tolist() for rows in streams.stream_windows(iter(docs), 2, 6, 3, SEP)
              for w in rows]
  assert out == expected and len(out) % 2 == 0 and len(out) >= 4
  # Row 0: document 1, then (step 1) the rest of it and document 3; row 1: document 2.
  assert out[0] == [10, 11, 12, 13, 14, SEP] and out[1] == [20, 21, 22, 23, 24, 25]
  assert out[2] == [13, 14, SEP, 30, 31, 32] and out[3] == [23, 24, 25, 26, 27, 28]
  with pytest.raises(ValueError, match="stride"):
    streams.row_streams(ds, batch_size=2, window=4, stride=5)


# ------------------------------------------------------------------ xlnet_plm task
TEXT = ["The cat sat on the mat.\nThe dog ran under the log.\nIt was a big red day.",
        "A bird sang in the tree.\nThen the night was blue.",
        "",
        "The small cat.",
        "The dogs ran.\nThe birds sang.\nIt was a sad night and a happy day.",
        "The house was small and green.\nThe park was happy and the tree was big."] * 6
L, P, B = 24, 3, 2
R = L // 2  # the task's default context length (XLNet: 256 of 512)


@pytest.fixture(scope="module")
def vocab(tmp_path_factory):
  return stream_testlib.stream_vocabulary(str(tmp_path_factory.mktemp("vocab")))


def xlnet_batches(vocab, n, texts=TEXT, random_b_prob=0.0, **kwargs):
  """n batches of xlnet_plm; by default with B always continuing A (random_b_prob 0), so
  that each window is its row stream's own text."""
  source = seqio.FunctionDataSource(
      lambda split, shuffle_files, seed=None: tf.data.Dataset.from_tensor_slices(
          {"text": texts}), splits=["train"])
  args = dict(sequence_length={"input_ids": L, "target_ids": P}, batch_size=B, seed=0,
              vocabulary=vocab, source=source, shuffle=False)
  with stream_testlib.random_b_prob(random_b_prob):
    ds = recipes.get_dataset("xlnet_plm", **{**args, **kwargs})
  return list(ds.take(n).as_numpy_iterator())


def source_documents(vocab, texts=TEXT):
  """The source token stream, one list of ids per non-empty document."""
  ds = tf.data.Dataset.from_tensor_slices({"text": texts})
  ds = seq2seq_recipes.flatten_sentences(pairs.tokenize_sentences(ds, vocab))
  return [ex["targets"].tolist() for ex in ds.as_numpy_iterator() if len(ex["targets"])]


def window_text(batch, row):
  """The L - 3 stream tokens of one example: its A|B [SEP] and final [SEP] [CLS] removed."""
  ids, types = batch["input_ids"][row], batch["token_type_ids"][row]
  return [int(t) for t in ids[types == 0][:-1]] + [int(t) for t in ids[types == 1][:-1]]


def row_documents(batches, row, sep):
  """(the row's stream text, its finished documents) from consecutive batches."""
  text = reassemble([window_text(b, row) for b in batches], R)
  return text, split_documents(text, sep)[0]


def test_xlnet_rows_continue_their_stream_and_decode_to_the_source(vocab):
  batches = xlnet_batches(vocab, 10)
  assert len(batches) == 10
  documents = source_documents(vocab)
  rows = []
  for r in range(B):
    text, docs = row_documents(batches, r, vocab.sep_id)  # windows overlap exactly
    # The context of batch t is stream[t R : (t + 1) R]: each context directly
    # follows the previous one, whose hidden states the model keeps as memory.
    for t, batch in enumerate(batches):
      assert window_text(batch, r)[:R] == text[t * R:(t + 1) * R]
    assert len(docs) >= 3 and all(doc in documents for doc in docs)
    rows.append(docs)
  # Row 0 starts with the first document; row 1 with the first one row 0's first
  # window did not reach. Decoded, the rows read the source text.
  finished, started = split_documents(window_text(batches[0], 0), vocab.sep_id)
  assert rows[0][0] == documents[0]
  assert rows[1][0] == documents[len(finished) + bool(started)]
  assert vocab.decode(rows[0][0]) == ("the cat sat on the mat. the dog ran under the log. "
                                      "it was a big red day.")


def test_xlnet_stream_examples_keep_the_perm_mask_invariants(vocab):
  for batch in xlnet_batches(vocab, 4, random_b_prob=0.5):  # XLNet's pairs
    for r in range(B):
      example = {k: v[r] for k, v in batch.items()}
      targets = np.argmax(example["target_mapping"], axis=1)[example["target_weights"] > 0]
      example["input_q"] = np.isin(np.arange(L), targets).astype(np.float32)
      check_example(example, window_text(batch, r), L, R, P, cls=vocab.cls_id,
                    sep=vocab.sep_id, pad=vocab.pad_id)


def test_xlnet_streams_resume_and_each_host_owns_its_rows(vocab):
  first = xlnet_batches(vocab, 6, seed=3, shuffle=True)
  resumed = xlnet_batches(vocab, 3, seed=3, shuffle=True, start_step=3)
  for a, b in zip(first[3:], resumed):
    for k in a:
      np.testing.assert_array_equal(a[k], b[k], err_msg=k)
  # Two hosts, each reading its shard of (distinct) documents into its own B rows.
  texts = stream_testlib.documents(40)
  documents = [tuple(d) for d in source_documents(vocab, texts)]
  owned = []
  for host in range(2):
    batches = xlnet_batches(vocab, 4, texts=texts, shard_id=host, num_shards=2)
    docs = set()
    for r in range(B):
      _, row_docs = row_documents(batches, r, vocab.sep_id)
      assert row_docs and all(tuple(d) in documents for d in row_docs)
      docs |= {tuple(d) for d in row_docs}
    owned.append(docs)
  assert owned[0] and owned[1] and not owned[0] & owned[1]


# ------------------------------------------------------- B from elsewhere (XLNet's pairs)
@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(0, 12), min_size=1, max_size=40), st.integers(1, 4),
       st.integers(1, 10), st.integers(1, 10))
def test_text_ahead_is_the_next_documents_and_leaves_the_layout_alone(lengths, batch_size,
                                                                      window, stride):
  stride = min(stride, window)
  # Token 1000 d + j: the j-th token of document d, so each token names its document.
  docs = [[1000 * d + j for j in range(n)] for d, n in enumerate(lengths, 1)]
  joined = [t for doc in docs for t in doc + [SEP]]
  plain = list(streams.stream_windows(iter(docs), batch_size, window, stride, SEP))
  ahead = list(streams.stream_windows(iter(docs), batch_size, window, stride, SEP,
                                      other_text=True))
  assert len(ahead) <= len(plain)  # the text ahead can run out first
  seen = set()
  for (rows, others), plain_rows in zip(ahead, plain):
    assert [r.tolist() for r in rows] == [r.tolist() for r in plain_rows]
    seen |= {t // 1000 for row in rows for t in row if t != SEP}
    text = [t for other in others for t in other.tolist()]
    assert len(others) == batch_size and all(len(o) == window for o in others)
    # The documents next in line, whole and in order, none of them in any window so far.
    assert any(joined[i:i + len(text)] == text and (i == 0 or joined[i - 1] == SEP)
               for i in range(len(joined)))
    assert not {t // 1000 for t in text if t != SEP} & seen


def _pair_parts(batch, row):
  """(context + A, B) tokens of one example."""
  ids, types = batch["input_ids"][row], batch["token_type_ids"][row]
  return ids[types == 0][:-1].tolist(), ids[types == 1][:-1].tolist()


def test_xlnet_b_is_text_from_elsewhere_half_the_time(vocab):
  """XLNet's data_utils draws B from elsewhere half the time: the same batches as with
  B continuing A (contexts, A, cut, targets, order), except B in about half the rows,
  which is then a slice of the source text that does not continue A."""
  texts = stream_testlib.documents(60)
  joined = [t for doc in source_documents(vocab, texts) for t in doc + [vocab.sep_id]]
  continuing = xlnet_batches(vocab, 8, texts=texts, seed=4)
  paired = xlnet_batches(vocab, 8, texts=texts, seed=4, random_b_prob=0.5)
  random_rows = 0
  for before, after in zip(continuing, paired):
    for k in ("token_type_ids", "attention_mask", "perm_mask", "target_mapping"):
      np.testing.assert_array_equal(before[k], after[k], err_msg=k)
    for r in range(B):
      (a_before, b_before), (a_after, b_after) = _pair_parts(before, r), _pair_parts(after, r)
      assert a_after == a_before and len(b_after) == len(b_before)
      if b_after != b_before:
        random_rows += 1
        assert any(joined[i:i + len(b_after)] == b_after for i in range(len(joined)))
  assert 4 <= random_rows <= 12, random_rows  # of 16 pairs; binomial(16, 1/2)
  # Deterministic, and resuming gives the same batches.
  resumed = xlnet_batches(vocab, 5, texts=texts, seed=4, random_b_prob=0.5, start_step=3)
  for a, b in zip(paired[3:], resumed):
    for k in a:
      np.testing.assert_array_equal(a[k], b[k], err_msg=k)
