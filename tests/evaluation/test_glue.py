"""GLUE task table, readers (official formats, bad-row reporting, test files' index
column), the server's labels and file names, and scoring with the leaderboard metrics."""
import os

import numpy as np
import pytest

from bertjax import paths
from bertjax.evaluation import glue, readers

# Official dev/train sizes (GLUE release), see ../shared/data/README.md.
OFFICIAL_ROWS = {("cola", "train"): 8551, ("cola", "dev"): 1043, ("sst2", "dev"): 872,
                 ("mrpc", "train"): 3668, ("mrpc", "dev"): 408, ("stsb", "dev"): 1500,
                 ("rte", "train"): 2490, ("rte", "dev"): 277, ("qnli", "dev"): 5463,
                 ("wnli", "dev"): 71}


def _write(path, lines):
  os.makedirs(os.path.dirname(path), exist_ok=True)
  with open(path, "w", encoding="utf-8") as f:
    f.write("\n".join(lines) + "\n")


def test_real_files_parse_completely():
  if not (paths.data_dir() / "glue").exists():
    pytest.skip("shared data folder absent")
  log = readers.SkipLog()
  for (name, split), rows in OFFICIAL_ROWS.items():
    examples = glue.read_examples(glue.get_task(name), split, log)
    assert len(examples) == rows, (name, split)
  assert len(log) == 0, log.summary()
  mrpc = glue.read_examples(glue.get_task("mrpc"), "dev", log, limit=1)[0]
  # BOM stripped from the header, bare quote kept inside the text.
  assert mrpc.label == 1 and mrpc.text_b.startswith('"The foodservice')


def test_bad_rows_are_reported_with_file_and_line_and_skipped(tmp_path):
  path = tmp_path / "glue" / "RTE" / "train.tsv"
  _write(path, ["index\tsentence1\tsentence2\tlabel",
                "0\tA man sleeps.\tA person sleeps.\tentailment",
                "1\tmissing a column\tentailment",
                "2\tA dog.\tA cat.\tmaybe",
                "3\tIt rains.\tIt is dry.\tnot_entailment"])
  log = readers.SkipLog()
  examples = glue.read_examples(glue.get_task("rte"), "train", log, data_dir=str(tmp_path))
  assert [e.label for e in examples] == [0, 1]
  assert [(e.line, e.path) for e in log.entries] == [(3, str(path)), (4, str(path))]
  assert "expected 4 tab-separated fields, found 3" in log.entries[0].reason
  assert "'maybe' not in rte's label set" in log.entries[1].reason
  assert "2 rows skipped (train.tsv: 2)" in log.summary()


def test_regression_and_mnli_qqp_formats(tmp_path):
  sts = tmp_path / "glue" / "STS-B" / "dev.tsv"
  header = "index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2\tscore"
  _write(sts, [header, "0\tg\tf\ty\t0\tn\tn\tA cat.\tA cat!\t4.750",
               "1\tg\tf\ty\t1\tn\tn\tA.\tB.\thigh"])
  log = readers.SkipLog()
  rows = glue.read_examples(glue.get_task("stsb"), "dev", log, data_dir=str(tmp_path))
  assert rows[0].label == 4.75 and rows[0].text_b == "A cat!" and "not a number" in str(log.entries[0])
  # MNLI dev: 16 columns, gold label last; QQP: id qid1 qid2 q1 q2 is_duplicate.
  mnli = tmp_path / "glue" / "MNLI" / "dev_mismatched.tsv"
  cols = ["index", "promptID", "pairID", "genre", "s1b", "s2b", "s1p", "s2p", "sentence1",
          "sentence2"] + [f"label{i}" for i in range(1, 6)] + ["gold_label"]
  _write(mnli, ["\t".join(cols), "\t".join(["0"] * 8 + ["P.", "H."] + ["neutral"] * 6)])
  qqp = tmp_path / "glue" / "QQP" / "train.tsv"
  _write(qqp, ["id\tqid1\tqid2\tquestion1\tquestion2\tis_duplicate", "0\t1\t2\tWhy?\tHow?\t1"])
  (m,) = glue.read_examples(glue.get_task("mnli"), "dev_mismatched", log, data_dir=str(tmp_path))
  (q,) = glue.read_examples(glue.get_task("qqp"), "train", log, data_dir=str(tmp_path))
  assert (m.text_a, m.text_b, m.label) == ("P.", "H.", 2) and (q.text_b, q.label) == ("How?", 1)
  with pytest.raises(FileNotFoundError, match="dev_matched.tsv"):
    glue.read_examples(glue.get_task("mnli"), "dev_matched", log, data_dir=str(tmp_path))


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


def test_evaluate_uses_the_leaderboard_metrics():
  logits = np.array([[0.1, 0.9], [0.8, 0.2], [0.3, 0.7], [0.6, 0.4]])
  report = glue.evaluate(glue.get_task("mrpc"), logits, np.array([1, 0, 0, 0]))
  assert report == {"f1": pytest.approx(2 / 3), "accuracy": 0.75}
  sts = glue.evaluate(glue.get_task("stsb"), np.array([[1.0], [2.0], [3.5]]),
                      np.array([0.5, 2.5, 2.0]))
  assert set(sts) == {"pearson", "spearman"} and sts["spearman"] == pytest.approx(0.5)
