"""The word-order signals each pretrained arm reports (tables.word_order, the report)."""
import json
import os
from unittest import mock

from bertjax.tables import word_order
from tests.tables.toy import BASELINES, TABLE, FakeCommands

LEARNED = {"step": 2, "mlm_unseen_loss": 4.5, "attention_previous_max": 0.31,
           "attention_next_max": 0.62, "attention_previous_head": 0, "attention_next_head": 3}


def test_the_gate_needs_both_signals_at_one_eval():
  assert word_order.passes(LEARNED, BASELINES)
  assert not word_order.passes({**LEARNED, "mlm_unseen_loss": 5.2}, BASELINES)
  assert not word_order.passes({**LEARNED, "attention_next_max": 0.4}, BASELINES)
  assert not word_order.passes({"step": 2, "mlm_unseen_loss": 4.0}, BASELINES)
  assert word_order.first_pass([{**LEARNED, "step": 1, "mlm_unseen_loss": 6.0}, LEARNED],
                               BASELINES) == 2
  assert word_order.summary(LEARNED, BASELINES) == (
      "unseen loss 4.50 (bigram 5.00), neighbour attention 0.62: yes")
  assert word_order.summary({"step": 1, "loss": 3.0}, BASELINES) == "not logged"
  assert word_order.summary(LEARNED, None) == "unseen loss 4.50, neighbour attention 0.62"


def test_evals_reads_only_the_eval_rows_that_carry_a_signal(tmp_path):
  rows = [{"split": "train", "step": 1, "mlm_unseen_loss": 9.0},
          {"split": "eval", "step": 1, "loss": 3.0},
          {"split": "eval", "extra": 1, **LEARNED}]
  (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
  assert word_order.evals(str(tmp_path)) == [LEARNED]
  assert word_order.evals(str(tmp_path / "missing")) == []


def test_a_step_logged_again_after_a_resume_counts_once_with_its_latest_values(tmp_path):
  stale = {**LEARNED, "attention_next_max": 0.1}
  later = {**LEARNED, "step": 3}
  rows = [{"split": "eval", **stale}, {"split": "eval", **later}, {"split": "eval", **LEARNED}]
  (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
  assert word_order.evals(str(tmp_path)) == [LEARNED, later]


def test_the_table_reports_each_arms_signals_and_plots_them(tmp_path):
  from bertjax.tables import __main__ as cli, catalog
  early = {**LEARNED, "step": 1, "mlm_unseen_loss": 6.5, "attention_next_max": 0.1}
  fake = FakeCommands(signals={"a": [early, LEARNED],
                               "b": [{**LEARNED, "attention_previous_max": 0.1,
                                      "attention_next_max": 0.2}]})
  results = tmp_path / "toy.md"
  with mock.patch.dict(catalog.TABLES, {"toy": TABLE}):
    assert cli.main(["toy", "--scale=tiny", f"--out={tmp_path / 'out'}",
                     f"--results={results}"], execute=fake) == 0
  text = results.read_text()

  pretraining = [line for line in text.splitlines() if "neighbour attention" in line]
  assert len(pretraining) == 2, text
  assert pretraining[0].startswith("| A |") and pretraining[0].endswith(
      "unseen loss 4.50 (bigram 5.00), neighbour attention 0.62: yes |")
  assert pretraining[1].startswith("| B |") and pretraining[1].endswith(
      "unseen loss 4.50 (bigram 5.00), neighbour attention 0.20: no |")
  assert "(5.00 nats; unigram 7.00)" in text
  plot = tmp_path / "toy_word_order.png"
  assert os.path.getsize(plot) > 0 and "![toy word order](toy_word_order.png)" in text
