"""Packing / bucketing, the Encoder API and the encode CLI on a tiny random BERT."""
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from bertjax.sbert import encode
from bertjax.sbert import model as sbert
from tests.helpers import sbert as sbert_helpers


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(1, 40), min_size=1, max_size=60), st.sampled_from([1, 3, 32]))
def test_pack_rows_places_every_sentence_once_within_capacity(lengths, max_segments):
  rows = encode.pack_rows(lengths, row_length=16, max_segments=max_segments)
  placed = sorted(i for _, members in rows for i in members)
  assert placed == list(range(len(lengths)))
  for length, members in rows:
    assert sum(lengths[i] for i in members) <= length
    assert len(members) <= max_segments
    if length > 16:  # opened by an over-long sentence, in a power-of-two row
      assert lengths[members[0]] > 16 and length & (length - 1) == 0


def test_make_batches_restarts_positions_and_uses_few_shapes():
  token_ids = [np.arange(2, 2 + n) for n in [5, 3, 9, 2, 30, 7, 1]]
  batches = list(encode.make_batches(token_ids, row_length=16, max_segments=4, batch_tokens=64))
  seen = []
  for b in batches:
    for row, slot, i in zip(b.rows, b.slots, b.sentences):
      where = b.segment_ids[row] == slot + 1
      np.testing.assert_array_equal(b.input_ids[row][where], token_ids[i])
      np.testing.assert_array_equal(b.position_ids[row][where], np.arange(len(token_ids[i])))
      seen.append(i)
  assert sorted(seen) == list(range(len(token_ids)))
  assert {b.input_ids.shape for b in batches} <= {(4, 16), (2, 32), (1, 32), (2, 16), (1, 16)}


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
  return sbert_helpers.write_tiny_bert(tmp_path_factory.mktemp("tiny_bert"))


SENTENCES = ["a man is playing the guitar .", "", "the dog runs on grass",
             "a woman is playing the piano , very long sentence with many words here " * 4,
             "cat", "the cats runs", "a man"]


@pytest.mark.parametrize("pooling", sbert.POOLING_MODES)
def test_packed_and_bucketed_encoding_equal_one_sentence_at_a_time(model_dir, pooling):
  packed = encode.Encoder.from_checkpoint(model_dir, pooling=pooling, max_seq_length=24,
                                          row_length=16, batch_tokens=64)
  bucketed = encode.Encoder.from_checkpoint(model_dir, pooling=pooling, max_seq_length=24,
                                            packing=False, batch_tokens=64)
  alone = np.concatenate([bucketed.encode([s]) for s in SENTENCES])
  np.testing.assert_allclose(packed.encode(SENTENCES), alone, atol=2e-5)
  np.testing.assert_allclose(bucketed.encode(SENTENCES), alone, atol=2e-5)
  assert packed.stats.empty == 1 and packed.stats.truncated == 1


def test_encoder_matches_transformers_mean_pooling(model_dir):
  import torch
  import transformers
  ref = transformers.BertModel.from_pretrained(model_dir).eval()
  encoder = encode.Encoder.from_checkpoint(model_dir, normalize=True)
  ids, _ = encoder.tokenizer.encode(SENTENCES[:3], 64)
  expected = []
  with torch.no_grad():
    for x in ids:
      hidden = ref(input_ids=torch.tensor(x[None].astype(np.int64))).last_hidden_state[0].mean(0)
      expected.append(torch.nn.functional.normalize(hidden, dim=0).numpy())
  np.testing.assert_allclose(encoder.encode(SENTENCES[:3]), np.stack(expected), atol=1e-5)


def test_encode_rejects_a_bare_string_and_accepts_nothing(model_dir):
  encoder = encode.Encoder.from_checkpoint(model_dir)
  with pytest.raises(TypeError, match="list of sentences"):
    encoder.encode("a man")
  assert encoder.encode([]).shape == (0, 32)


def test_read_lines_reports_invalid_utf8_by_line_number(tmp_path):
  path = tmp_path / "in.txt"
  path.write_bytes(b"fine\r\n\xff bad\n\nok \xe2\x82\n")
  with pytest.raises(ValueError, match=r"2 line\(s\) are not valid UTF-8 \(line 2, 4;"):
    encode.read_lines(str(path))
  lines, invalid = encode.read_lines(str(path), errors="replace")
  assert invalid == [2, 4] and lines[0] == "fine" and lines[2] == "" and len(lines) == 4


def _cli(model_dir, tmp_path, content: bytes, *flags):
  source, target = tmp_path / "in.txt", tmp_path / "out.npy"
  source.write_bytes(content)
  return subprocess.run(
      [sys.executable, "-m", "bertjax.encode", f"--checkpoint={model_dir}", f"--input={source}",
       f"--output={target}", "--max_seq_length=12", "--noprogress", *flags],
      capture_output=True, text=True, timeout=300), target


def test_cli_keeps_one_row_per_line_and_counts_empty_and_truncated(model_dir, tmp_path):
  text = "\n".join(SENTENCES).encode() + b"\n"
  result, target = _cli(model_dir, tmp_path, text, "--pooling=cls")
  assert result.returncode == 0, result.stderr
  vectors = np.load(target)
  assert vectors.shape == (len(SENTENCES), 32)
  assert "1 empty line(s)" in result.stderr and "1 line(s) were longer than 12" in result.stderr
  expected = encode.Encoder.from_checkpoint(model_dir, pooling="cls",
                                            max_seq_length=12).encode(SENTENCES)
  np.testing.assert_allclose(vectors, expected, atol=1e-5)


def test_cli_fails_on_invalid_utf8_naming_the_line(model_dir, tmp_path):
  result, target = _cli(model_dir, tmp_path, b"a man\nthe \xc3\x28 dog\n")
  assert result.returncode != 0 and "line 2" in result.stderr and not target.exists()
  result, target = _cli(model_dir, tmp_path, b"a man\nthe \xc3\x28 dog\n", "--errors=replace")
  assert result.returncode == 0 and np.load(target).shape[0] == 2
  assert "[2]" in result.stderr
