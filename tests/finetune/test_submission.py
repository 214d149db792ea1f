"""Submission files: GLUE server TSVs, SQuAD predictions / null odds, conlleval input,
SWAG CSV. (The GLUE server's labels and file names: tests/evaluation/test_glue.py.)"""
import csv
import json

import numpy as np
import pytest

from bertjax.evaluation import conll
from bertjax.finetune import submission


def test_glue_tsv_round_trip(tmp_path):
  path = submission.write_glue(str(tmp_path / "test" / "RTE.tsv"), ["0", "1"],
                               ["entailment", "not_entailment"])
  assert open(path).read() == "index\tprediction\n0\tentailment\n1\tnot_entailment\n"
  assert submission.read_glue(path) == {"0": "entailment", "1": "not_entailment"}
  with pytest.raises(ValueError, match="2 indices but 1"):
    submission.write_glue(path, ["0", "1"], ["entailment"])


def test_squad_files(tmp_path):
  written = submission.write_squad(str(tmp_path), {"q1": "the cat", "q2": ""},
                                   {"q1": -3.5, "q2": np.float32(2.0)})
  assert [p.rsplit("/", 1)[1] for p in written] == ["predictions.json", "null_odds.json"]
  assert json.loads((tmp_path / "predictions.json").read_text()) == {"q1": "the cat", "q2": ""}
  assert json.loads((tmp_path / "null_odds.json").read_text()) == {"q1": -3.5, "q2": 2.0}
  assert len(submission.write_squad(str(tmp_path / "v11"), {"q": "x"})) == 1


def test_conll_output_is_conlleval_input(tmp_path):
  sentences = [conll.Sentence(("EU", "rejects", "German", "call"),
                            ("B-ORG", "O", "B-MISC", "O"), "f:1"),
               conll.Sentence(("Peter", "Blackburn"), ("B-PER", "I-PER"), "f:7")]
  predicted = [["B-ORG", "O", "B-PER", "O"], ["B-PER", "I-PER"]]
  path = submission.write_conll(str(tmp_path / "dev.txt"), sentences, predicted)
  lines = open(path).read().split("\n")
  assert lines[:5] == ["EU B-ORG B-ORG", "rejects O O", "German B-MISC B-PER", "call O O", ""]
  # Read back as conlleval would (last two columns: gold, predicted) -> the same scores.
  gold, pred, g, p = [], [], [], []
  for line in lines:
    if not line:
      if g:
        gold.append(g)
        pred.append(p)
      g, p = [], []
      continue
    g.append(line.split()[-2])
    p.append(line.split()[-1])
  assert conll.entity_scores(gold, pred) == conll.entity_scores(
      [s.tags for s in sentences], predicted)
  with pytest.raises(ValueError, match="4 words but 3 tags"):
    submission.write_conll(path, sentences[:1], [["O", "O", "O"]])


def test_swag_csv(tmp_path):
  path = submission.write_swag(str(tmp_path / "swag.csv"), np.array([3, 0, 1]))
  with open(path, newline="") as f:
    assert list(csv.reader(f)) == [["pred"], ["3"], ["0"], ["1"]]
