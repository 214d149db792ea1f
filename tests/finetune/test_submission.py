"""Submission files: GLUE server TSVs (label strings, STS-B scores, test indices),
SQuAD predictions / null odds, conlleval input, SWAG CSV."""
import csv
import json

import numpy as np
import pytest

from bertjax.evaluation import conlleval, readers
from bertjax.finetune import glue, ner, submission


def test_glue_server_labels_and_file_names():
  mnli, stsb, qnli, cola = (glue.get_task(n) for n in ("mnli", "stsb", "qnli", "cola"))
  assert mnli.submission_names == ("MNLI-m", "MNLI-mm")
  assert mnli.test_splits == ("test_matched", "test_mismatched")
  assert [glue.get_task(n).submission_names[0] for n in ("sst2", "stsb", "qqp", "wnli")] == [
      "SST-2", "STS-B", "QQP", "WNLI"]
  logits = np.array([[0.0, 2.0, 1.0], [3.0, 0.0, 0.0], [0.0, 0.0, 5.0]])
  assert glue.submission_labels(mnli, logits) == ["entailment", "contradiction", "neutral"]
  assert glue.submission_labels(qnli, np.array([[1.0, 0.0], [0.0, 1.0]])) == [
      "entailment", "not_entailment"]
  assert glue.submission_labels(cola, np.array([[0.0, 1.0]])) == ["1"]
  # STS-B: the regression head's centred output back on the 0..5 scale, clipped.
  assert glue.submission_labels(stsb, np.array([[0.0], [-2.0], [1.5], [0.2]])) == [
      "2.500", "0.000", "5.000", "3.000"]


def test_glue_test_reader_keeps_the_index_column(tmp_path):
  folder = tmp_path / "glue" / "SST-2"
  folder.mkdir(parents=True)
  (folder / "test.tsv").write_text("index\tsentence\n0\tgood .\n7\tbad movie\n9\ttoo\tmany\n")
  skips = readers.SkipLog()
  examples = glue.read_test_examples(glue.get_task("sst2"), "test", skips, str(tmp_path))
  assert [(e.guid, e.text_a, e.text_b) for e in examples] == [("0", "good .", None),
                                                             ("7", "bad movie", None)]
  assert len(skips) == 1 and skips.entries[0].line == 4
  # Dev rows are indexed by their data row in the file (header not counted).
  (folder / "dev.tsv").write_text("sentence\tlabel\nfine .\t1\nbroken\n\nmeh .\t0\n")
  dev = glue.read_examples(glue.get_task("sst2"), "dev", skips, str(tmp_path))
  assert [e.guid for e in dev] == ["0", "3"]


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
  sentences = [ner.Sentence(("EU", "rejects", "German", "call"),
                            ("B-ORG", "O", "B-MISC", "O"), "f:1"),
               ner.Sentence(("Peter", "Blackburn"), ("B-PER", "I-PER"), "f:7")]
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
  assert conlleval.entity_scores(gold, pred) == conlleval.entity_scores(
      [s.tags for s in sentences], predicted)
  with pytest.raises(ValueError, match="4 words but 3 tags"):
    submission.write_conll(path, sentences[:1], [["O", "O", "O"]])


def test_swag_csv(tmp_path):
  path = submission.write_swag(str(tmp_path / "swag.csv"), np.array([3, 0, 1]))
  with open(path, newline="") as f:
    assert list(csv.reader(f)) == [["pred"], ["3"], ["0"], ["1"]]
