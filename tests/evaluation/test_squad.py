"""SQuAD: reading the official JSON (misaligned answers reported, the real dev set split
by article), and scoring that reproduces the official v1.1 / v2.0 scripts on
hand-checked cases."""
import json
import os

import pytest

from bertjax.evaluation import readers, squad as sm

CONTEXT = ("Super Bowl 50 was an American football game. The Denver Broncos defeated the "
           "Carolina Panthers 24-10 at Levi's Stadium in Santa Clara, California.")


def _v2_file(tmp_path):
  start = CONTEXT.index("Denver Broncos")
  data = {"version": "v2.0", "data": [{"title": "SB", "paragraphs": [{"context": CONTEXT, "qas": [
      {"id": "q1", "question": "Who won?", "is_impossible": False,
       "answers": [{"text": "Denver Broncos", "answer_start": start},
                   {"text": "Broncos", "answer_start": start + 7}]},
      {"id": "q2", "question": "Where was it?", "is_impossible": False,
       "answers": [{"text": "Levi's Stadium", "answer_start": 3}]},
      {"id": "q3", "question": "Who sang?", "is_impossible": True, "answers": [],
       "plausible_answers": [{"text": "Beyonce", "answer_start": 0}]}]}]}]}
  path = tmp_path / "train-v2.0.json"
  path.write_text(json.dumps(data, indent=1))
  return str(path)


def test_misaligned_answer_is_reported_and_question_kept_for_scoring(tmp_path):
  path = _v2_file(tmp_path)
  log = readers.SkipLog()
  examples = sm.read_examples(path, log)
  assert [e.qid for e in examples] == ["q1", "q2", "q3"]
  assert len(log) == 1 and log.entries[0].path == path
  # The line that holds "q2" in the indented JSON.
  lines = open(path).read().split("\n")
  assert '"q2"' in lines[log.entries[0].line - 1]
  assert "does not match the context" in log.entries[0].reason
  assert examples[1].answer_texts == ("Levi's Stadium",) and not examples[1].answer_spans
  assert examples[0].answer_spans == ((CONTEXT.index("Denver"), CONTEXT.index(" defeated")),
                                      (CONTEXT.index("Broncos"), CONTEXT.index(" defeated")))
  assert examples[2].is_impossible


def test_real_dev_file_and_its_split_by_article():
  path = sm.default_path()
  if not os.path.exists(path):
    pytest.skip("shared data folder absent")
  log = readers.SkipLog()
  examples = sm.read_examples(path, log)
  assert len(examples) == 10570 and len({e.article for e in examples}) == 48 and not len(log)
  train, held_out = sm.split_by_article(examples, 38)
  assert {e.article for e in train} == set(range(38))
  assert not {e.context for e in train} & {e.context for e in held_out}


def test_normalisation_drops_case_punctuation_articles_and_spaces():
  assert sm.normalize_answer("The  Eiffel-Tower!") == "eiffeltower"
  assert sm.normalize_answer("an apple, a pear and THE plum") == "apple pear and plum"
  assert sm.normalize_answer("theatre") == "theatre"  # article only as a whole word
  assert sm.normalize_answer(" \tA ") == ""


def test_exact_and_f1_hand_checked():
  assert sm.exact_match("the Denver Broncos", "Denver Broncos") == 1.0
  # pred tokens [denver, broncos, team], gold [denver, broncos]: P=2/3 R=1 F1=0.8.
  assert sm.f1("Denver Broncos team", "Denver Broncos") == pytest.approx(0.8)
  # Repeated tokens count with multiplicity: pred [a, a] vs gold [a] -> overlap 1.
  assert sm.f1("b b", "b") == pytest.approx(2 * 0.5 * 1 / 1.5)
  assert sm.f1("Santa Clara", "Levi's Stadium") == 0.0
  # Empty answers: v2.0 scores an empty match as 1, v1.1 has no overlap -> 0.
  assert sm.f1("", "") == 1.0 and sm.f1("", "", version="1.1") == 0.0
  assert sm.f1("the", "Denver") == 0.0


def test_v1_evaluate_takes_max_over_golds_and_counts_missing_as_zero():
  golds = {"q1": ["Denver Broncos", "The Denver Broncos", "Broncos"],
           "q2": ["Santa Clara, California", "Levi's Stadium"],
           "q3": ["1966"]}
  preds = {"q1": "Broncos", "q2": "Levi's Stadium in Santa Clara"}
  report = sm.evaluate(golds, preds, version="1.1")
  # q1 EM 1 F1 1; q2 best F1 vs "Levi's Stadium": pred [levis, stadium, in, santa, clara]
  # P=2/5 R=1 F1=4/7, vs "Santa Clara, California": P=2/5 R=2/3 F1=1/2 -> 4/7; q3 missing.
  assert report["exact"] == pytest.approx(100 / 3)
  assert report["f1"] == pytest.approx(100 * (1 + 4 / 7) / 3)
  assert report["total"] == 3


def test_v2_threshold_and_best_f1_thresh():
  golds = {"a": ["Paris"], "b": [], "c": ["blue sky"], "d": []}
  preds = {"a": "Paris", "b": "London", "c": "sky", "d": ""}
  na = {"a": 0.1, "b": 0.8, "c": 0.5, "d": 0.3}
  # Raw F1: a 1, b 0, c 2/3 (P=1 R=1/2), d 1 (empty vs no answer).
  report = sm.evaluate(golds, preds, version="2.0", na_scores=na, threshold=0.4)
  # na > 0.4 blanks b (-> 1, correct abstention) and c (-> 0): scores 1, 1, 0, 1.
  assert report["exact"] == pytest.approx(75.0) and report["f1"] == pytest.approx(75.0)
  assert report["HasAns_f1"] == pytest.approx(50.0) and report["NoAns_f1"] == 100.0
  assert report["HasAns_total"] == 2 and report["NoAns_total"] == 2
  # Sweep in na order a(0.1) d(0.3) c(0.5) b(0.8), starting from 2 (the two NoAns):
  # +1 -> 3 @0.1; d predicts "" -> 3; +2/3 -> 3.667 @0.5; b answers wrongly -> 2.667.
  assert report["best_f1"] == pytest.approx(100 * (3 + 2 / 3) / 4)
  assert report["best_f1_thresh"] == 0.5
  # EM: c scores 0 exact, so the best is 3/4 first reached at 0.1 (ties keep the lowest).
  assert report["best_exact"] == pytest.approx(75.0) and report["best_exact_thresh"] == 0.1


def test_v2_skips_missing_predictions_and_rejects_unknown_version():
  report = sm.evaluate({"a": ["x"], "b": []}, {"b": ""}, version="2.0")
  assert report["total"] == 1 and report["exact"] == 100.0
  with pytest.raises(ValueError, match="'1.1' or '2.0'"):
    sm.evaluate({"a": ["x"]}, {"a": "x"}, version="3")
