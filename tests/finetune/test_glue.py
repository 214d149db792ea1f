"""GLUE readers (official formats, bad-row reporting), pair features and metrics."""
import os

import numpy as np
import pytest

from bertjax import paths
from bertjax.finetune import glue
from bertjax.evaluation import readers
from bertjax.finetune.tokenization import WordPiece

VOCAB = paths.data_dir() / "tokenizers" / "bert-base-uncased" / "vocab.txt"
# Official dev/train sizes (GLUE release), see ../shared/data/README.md.
OFFICIAL_ROWS = {("cola", "train"): 8551, ("cola", "dev"): 1043, ("sst2", "dev"): 872,
                 ("mrpc", "train"): 3668, ("mrpc", "dev"): 408, ("stsb", "dev"): 1500,
                 ("rte", "train"): 2490, ("rte", "dev"): 277, ("qnli", "dev"): 5463,
                 ("wnli", "dev"): 71}


@pytest.fixture(scope="module")
def tokenizer():
  if not VOCAB.exists():
    pytest.skip("shared data folder absent")
  return WordPiece.from_path(str(VOCAB))


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


def test_pair_features_and_longest_first_truncation(tokenizer):
  examples = [glue.PairExample("the cat sat", "a dog", 1, "x:1"),
              glue.PairExample("one two three four five six", "seven", 0, "x:2")]
  arrays = glue.convert_examples(examples, tokenizer, max_length=8)
  cls, sep = tokenizer.cls_id, tokenizer.sep_id
  row0 = [cls, *tokenizer.encode("the cat sat"), sep, *tokenizer.encode("a dog"), sep]
  np.testing.assert_array_equal(arrays["input_ids"][0], row0)
  np.testing.assert_array_equal(arrays["token_type_ids"][0], [0] * 5 + [1] * 3)
  # 5 slots for 6 + 1 tokens: the longer side loses its tail, the short one is kept.
  row1 = [cls, *tokenizer.encode("one two three four"), sep, *tokenizer.encode("seven"), sep]
  np.testing.assert_array_equal(arrays["input_ids"][1], row1)
  assert arrays["attention_mask"].sum() == 16 and arrays["labels"].tolist() == [1, 0]


def test_evaluate_uses_the_leaderboard_metrics():
  logits = np.array([[0.1, 0.9], [0.8, 0.2], [0.3, 0.7], [0.6, 0.4]])
  report = glue.evaluate(glue.get_task("mrpc"), logits, np.array([1, 0, 0, 0]))
  assert report == {"f1": pytest.approx(2 / 3), "accuracy": 0.75}
  sts = glue.evaluate(glue.get_task("stsb"), np.array([[1.0], [2.0], [3.5]]),
                      np.array([0.5, 2.5, 2.0]))
  assert set(sts) == {"pearson", "spearman"} and sts["spearman"] == pytest.approx(0.5)
