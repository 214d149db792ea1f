"""SWAG: official CSV reading with bad-row reporting and 4-way choice features."""
import csv

import numpy as np
import pytest

from bertjax import paths
from bertjax.evaluation import readers
from bertjax.finetune import swag
from bertjax.finetune.tokenization import WordPiece

VOCAB = paths.data_dir() / "tokenizers" / "bert-base-uncased" / "vocab.txt"
HEADER = ["", "video-id", "fold-ind", "startphrase", "sent1", "sent2", "gold-source",
          "ending0", "ending1", "ending2", "ending3", "label"]


def _write(path, rows):
  with open(path, "w", newline="", encoding="utf-8") as f:
    writer = csv.writer(f)
    writer.writerow(HEADER)
    writer.writerows(rows)


def test_reads_official_csv_and_reports_bad_rows(tmp_path):
  path = tmp_path / "val.csv"
  good = [0, "lsmdc1", 19, "Someone opens a door. He", "Someone opens a door.", "He", "gold",
          "walks in, smiling.", 'says "hi".', "eats the door.", "flies.", 0]
  _write(path, [good, good[:5], good[:-1] + [7], good[:-1] + [3]])
  log = readers.SkipLog()
  examples = swag.read_examples(str(path), log)
  assert [e.label for e in examples] == [0, 3]
  assert examples[0].endings[0] == "walks in, smiling." and examples[0].endings[1] == 'says "hi".'
  assert [e.line for e in log.entries] == [3, 4]
  assert "fewer fields" in log.entries[0].reason and "label '7'" in log.entries[1].reason
  with pytest.raises(FileNotFoundError, match="not in the shared data"):
    swag.read_examples(str(tmp_path / "train.csv"), log)


def test_choice_features():
  if not VOCAB.exists():
    pytest.skip("shared data folder absent")
  tok = WordPiece.from_path(str(VOCAB))
  example = swag.SwagExample("A man sits.", "He", ("reads.", "eats.", "runs away.", "sleeps."), 2,
                             "x:2")
  arrays = swag.convert_examples([example, example], tok, max_length=16)
  assert arrays["input_ids"].shape == (2, 4, 16) and arrays["labels"].tolist() == [2, 2]
  row = arrays["input_ids"][0, 2]
  expected = [tok.cls_id, *tok.encode("A man sits."), tok.sep_id, *tok.encode("He runs away."),
              tok.sep_id]
  np.testing.assert_array_equal(row[:len(expected)], expected)
  n_context = len(tok.encode("A man sits.")) + 2
  assert arrays["token_type_ids"][0, 2, :n_context].sum() == 0
  assert arrays["token_type_ids"][0, 2, n_context:len(expected)].all()
  assert swag.accuracy(np.array([[0, 0, 1, 0], [1, 0, 0, 0]]), arrays["labels"]) == 0.5
