"""SWAG: official CSV reading with bad-row reporting, and accuracy over four endings."""
import csv

import numpy as np
import pytest

from bertjax.evaluation import readers, swag

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


def test_accuracy_takes_the_highest_scoring_ending():
  assert swag.accuracy(np.array([[0, 0, 1, 0], [1, 0, 0, 0]]), np.array([2, 2])) == 0.5
  with pytest.raises(ValueError, match="differ in shape"):
    swag.accuracy(np.zeros((2, 4)), np.array([0]))
