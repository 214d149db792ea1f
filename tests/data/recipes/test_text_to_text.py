"""Text-to-text GLUE / SQuAD: T5's formats, postprocess(format(label)) == label, metrics on
hand-checked predictions, invalid predictions counted, and the tasks' batches."""
import os

import hypothesis
from hypothesis import strategies as st
import numpy as np
import pytest
import seqio
import tensorflow as tf

from bertjax import paths
from bertjax.data.recipes import text_to_text as t2t
from bertjax.evaluation import glue
from tests.helpers import text_to_text as testlib

DATA = paths.data_dir()
needs_data = pytest.mark.skipif(not (DATA / "glue").is_dir(), reason="no ../shared/data")


# ----------------------------------------------------------------------------- formats
def test_stsb_and_qqp_examples_of_t5s_docstrings():
  # t5.data.preprocessors.stsb / glue docstrings (QQP: label 1 = duplicate).
  inputs, targets = t2t.format_glue(
      "stsb", ["Three more US soldiers killed in Afghanistan",
               "NATO Soldier Killed in Afghanistan"], 1.8)
  assert inputs == ("stsb sentence1: Three more US soldiers killed in Afghanistan "
                    "sentence2: NATO Soldier Killed in Afghanistan")
  assert targets == "1.8"
  inputs, targets = t2t.format_glue("qqp", ["Why do I easily get bored of my friends?",
                                            "Why do I get bored of friends so quickly?"], 1)
  assert inputs == ("qqp question1: Why do I easily get bored of my friends? question2: "
                    "Why do I get bored of friends so quickly?")
  assert targets == "duplicate"


def test_features_are_joined_in_sorted_name_order_as_t5():
  # MNLI's file has premise then hypothesis; T5 (TFDS names, sorted) puts hypothesis first.
  inputs, targets = t2t.format_glue("mnli", ["A man sleeps.", "A person rests."], 2)
  assert inputs == "mnli hypothesis: A person rests. premise: A man sleeps."
  assert targets == "neutral"
  assert t2t.format_glue("qnli", ["Who?", "Him."], 1) == (
      "qnli question: Who? sentence: Him.", "not_entailment")
  assert t2t.format_glue("sst2", ["fine ."], 0) == ("sst2 sentence: fine .", "negative")


def test_stsb_targets_equal_t5s_tensorflow_rounding():
  scores = np.concatenate([np.linspace(0, 5, 501), [0.7, 2.5, 3.1, 4.9, 0.1, 0.3]])
  t5 = tf.strings.as_string(tf.round(tf.constant(scores, tf.float32) * 5) / 5, precision=1)
  assert [t2t.label_text("stsb", s) for s in scores] == [s.decode() for s in t5.numpy()]


def test_squad_format_pads_punctuation_as_t5():
  inputs, target = t2t.format_squad("Who won in 2015?", "Denver (the Broncos) won, 24-10.",
                                    ["Denver", "the Broncos"])
  assert inputs == ("question: Who won in 2015 ? context: Denver ( the Broncos ) won , "
                    "24 - 10 . ")
  assert target == "Denver"
  assert t2t.pad_punctuation("U.S.  it's") == "U . S . it ' s"


@needs_data
def test_real_glue_and_squad_rows():
  sst2 = t2t.glue_rows("sst2", "dev", str(DATA))
  assert len(sst2) == 872
  assert sst2[0]["inputs"] == "sst2 sentence: it 's a charming and often affecting journey . "
  assert sst2[0]["targets"] == "positive"
  rte = t2t.glue_rows("rte", "dev", str(DATA))
  assert len(rte) == 277 and rte[0]["inputs"].startswith("rte sentence1: Dana Reeve")
  assert " sentence2: " in rte[0]["inputs"] and rte[0]["targets"] == "not_entailment"
  assert t2t.glue_rows("cola", "dev", str(DATA))[0]["targets"] in ("acceptable", "unacceptable")
  squad = t2t.squad_rows(str(DATA / "squad" / "dev-v1.1.json"))
  assert len(squad) == 10570
  assert squad[0]["inputs"].startswith("question: Which NFL team represented the AFC at "
                                       "Super Bowl 50 ? context: Super Bowl 50 was")
  assert squad[0]["targets"] == "Denver Broncos" and len(squad[0]["answers"]) == 3


def test_mnli_and_qqp_read_from_files_in_glue_format(tmp_path):
  mnli_header = ["index", "promptID", "pairID", "genre", "sentence1_binary_parse",
                 "sentence2_binary_parse", "sentence1_parse", "sentence2_parse", "sentence1",
                 "sentence2", "label1", "gold_label"]
  row = ["0", "1", "1e", "fiction", "(", "(", "(", "(", "A man sleeps.", "A person rests.",
         "entailment", "entailment"]
  testlib.write_glue(tmp_path, "MNLI", "dev_mismatched", mnli_header, [row])
  testlib.write_glue(tmp_path, "QQP", "train", ["id", "qid1", "qid2", "question1", "question2",
                                         "is_duplicate"],
              [["0", "1", "2", "Why?", "Why not?", "0"], ["1", "3", "4", "broken row"]])
  (mnli,) = t2t.glue_rows("mnli", "dev_mismatched", str(tmp_path))
  assert mnli["inputs"] == "mnli hypothesis: A person rests. premise: A man sleeps."
  assert mnli["targets"] == "entailment"
  (qqp,) = t2t.glue_rows("qqp", "train", str(tmp_path))  # the broken row is skipped
  assert (qqp["inputs"], qqp["targets"]) == ("qqp question1: Why? question2: Why not?",
                                             "not_duplicate")
  assert t2t.TASKS["t2t_glue_mnli"].splits == {"train": "train", "validation": "dev_matched",
                                               "validation_mismatched": "dev_mismatched"}


# ----------------------------------------------------------------------------- postprocess
@pytest.mark.parametrize("task", sorted(t2t.GLUE_FORMATS))
def test_every_label_survives_format_then_postprocess(task):
  spec = glue.get_task(task)
  post = t2t.glue_postprocessor(task)
  if spec.is_regression:
    return  # covered by the property test below
  for label in range(spec.num_labels):
    assert post(t2t.label_text(task, label).encode()) == label
    assert post(" " + t2t.label_text(task, label) + " ") == label


@hypothesis.given(st.floats(0.0, 5.0))
@hypothesis.settings(max_examples=200, deadline=None)
def test_stsb_score_survives_format_then_postprocess(score):
  text = t2t.label_text("stsb", score)
  assert t2t.glue_postprocessor("stsb")(text) == pytest.approx(float(text))
  assert abs(t2t.glue_postprocessor("stsb")(text) - score) <= 0.1 + 1e-6


@hypothesis.given(st.sampled_from(sorted(t2t.GLUE_FORMATS)), st.text(max_size=12))
@hypothesis.settings(max_examples=100, deadline=None)
def test_unknown_text_is_invalid_not_an_error(task, text):
  words = t2t.GLUE_FORMATS[task].words
  hypothesis.assume(words is None or text.strip() not in words)
  value = t2t.glue_postprocessor(task)(text)
  if words is not None:
    assert value == t2t.INVALID
  else:
    try:
      expected = float(text.strip())
    except ValueError:
      expected = float(t2t.INVALID)
    assert value == expected or (np.isnan(value) and np.isnan(expected))


def test_targets_postprocess_to_the_exact_gold():
  example = {"label": np.float32(3.84)}
  assert t2t.glue_postprocessor("stsb")(b"3.8", example=example, is_target=True) == \
      pytest.approx(3.84)
  answers = {"answers": np.array([b"Denver Broncos", b"Broncos"])}
  assert t2t.squad_postprocess(b"Denver", example=answers, is_target=True) == [
      "Denver Broncos", "Broncos"]
  assert t2t.squad_postprocess(b"Denver") == "Denver"


# ----------------------------------------------------------------------------- metrics
def test_glue_metrics_on_hand_checked_predictions():
  acc = t2t.glue_metric_fn("sst2")([1, 0, 1, 0], [1, 0, 0, t2t.INVALID])
  assert acc == {"accuracy": 0.5, "invalid_predictions": 1.0}
  # MRPC: gold 1 1 0 0, predicted 1 INVALID 1 0. F1 counts INVALID as wrong (-> 0):
  # tp = 1, predicted positives = 2, actual positives = 2 -> F1 = 2 / 4.
  mrpc = t2t.glue_metric_fn("mrpc")([1, 1, 0, 0], [1, t2t.INVALID, 1, 0])
  assert mrpc == {"f1": 0.5, "accuracy": 0.5, "invalid_predictions": 1.0}
  # CoLA: confusion [[1, 1], [0, 2]] -> MCC = (1*2 - 1*0) / sqrt(2*1*2*3) = 2 / sqrt(12).
  cola = t2t.glue_metric_fn("cola")([0, 0, 1, 1], [0, 1, 1, 1])
  assert cola["mcc"] == pytest.approx(2 / np.sqrt(12))
  stsb = t2t.glue_metric_fn("stsb")([1.0, 2.0, 3.0], [1.2, 2.2, 3.2])
  assert stsb["pearson"] == pytest.approx(1.0) and stsb["spearman"] == pytest.approx(1.0)


def test_squad_metrics_take_the_best_gold_answer():
  golds = [["Denver Broncos", "Broncos"], ["the Panthers"], ["Santa Clara"]]
  preds = ["Broncos", "Carolina Panthers", "Levi's Stadium"]
  # EM: 1, 0, 0. F1: 1; "carolina panthers" vs "panthers": P 1/2, R 1 -> 2/3; 0.
  scores = t2t.squad_metric_fn(golds, preds)
  assert scores["exact_match"] == pytest.approx(1 / 3)
  assert scores["f1"] == pytest.approx((1 + 2 / 3) / 3)


# ----------------------------------------------------------------------------- tasks
@pytest.fixture(scope="module")
def vocab(tmp_path_factory):
  return testlib.toy_vocabulary(str(tmp_path_factory.mktemp("spm")))


def test_task_is_registered_with_postprocessor_and_metrics(vocab, tmp_path, monkeypatch):
  monkeypatch.setenv("BERTJAX_DATA_DIR", str(tmp_path))
  testlib.write_glue(tmp_path, "SST-2", "dev", ["sentence", "label"],
              [["a good movie", "1"], ["a bad film", "0"], ["it is fine", "1"]])
  task = t2t.get_task("t2t_glue_sst2", vocab)
  assert seqio.get_mixture_or_task("t2t_glue_sst2") is task
  assert task.postprocess_fn(b"positive") == 1
  assert task.predict_metric_fns[0]([1], [1])["accuracy"] == 1.0
  ex = next(task.get_dataset({"inputs": 16, "targets": 4}, split="validation", shuffle=False)
            .as_numpy_iterator())
  assert ex["inputs_pretokenized"].decode() == "sst2 sentence: a good movie"
  assert vocab.decode(list(ex["inputs"][:-1])) == "sst2 sentence: a good movie"
  assert ex["inputs"][-1] == vocab.eos_id and ex["targets"][-1] == vocab.eos_id
  assert vocab.decode(list(ex["targets"][:-1])) == "positive"


def test_task_dataset_batches(vocab, tmp_path, monkeypatch):
  monkeypatch.setenv("BERTJAX_DATA_DIR", str(tmp_path))
  rows = [[f"a good movie {i % 3}", "1"] for i in range(12)]
  testlib.write_glue(tmp_path, "SST-2", "train", ["sentence", "label"], rows)
  testlib.write_glue(tmp_path, "SST-2", "dev", ["sentence", "label"], rows[:5])
  train = next(t2t.text_to_text_dataset("t2t_glue_sst2", "train", 2, 64, 0, 0, 1, vocabulary=vocab)
               .as_numpy_iterator())
  assert train["input_ids"].shape == (2, 64) and train["labels"].shape == (2, 16)
  assert train["decoder_segment_ids"].max() > 1  # short examples packed together
  dev = list(t2t.text_to_text_dataset("t2t_glue_sst2", "validation", 2, 64, 0, 0, 1,
                              vocabulary=vocab).as_numpy_iterator())
  assert [len(b["input_ids"]) for b in dev] == [2, 2, 1]  # read once, in order, unpacked
  assert "decoder_segment_ids" not in dev[0]
  assert int(dev[0]["label_weights"][0].sum()) == len(vocab.encode("positive")) + 1
  with pytest.raises(ValueError, match="splits"):
    t2t.get_task("t2t_glue_sst2", vocab).get_dataset({"inputs": 8, "targets": 4}, split="x")


def test_train_subset_keeps_the_first_examples_over_many_passes(vocab, tmp_path, monkeypatch):
  monkeypatch.setenv("BERTJAX_DATA_DIR", str(tmp_path))
  rows = [["a" + " good" * i + " movie", "1"] for i in range(12)]  # 12 distinct sentences
  testlib.write_glue(tmp_path, "SST-2", "train", ["sentence", "label"], rows)
  ds = t2t.text_to_text_dataset("t2t_glue_sst2", "train", 4, 32, 0, 0, 1, vocabulary=vocab,
                                pack=False, max_train_examples=3)
  seen = {vocab.decode([t for t in row if t not in (0, vocab.eos_id)])
          for batch in ds.take(6).as_numpy_iterator() for row in batch["input_ids"]}
  assert seen == {f"sst2 sentence: {r[0]}" for r in rows[:3]}  # 24 rows, 3 examples


def test_data_directory_defaults_to_the_shared_data():
  assert t2t.data_directory() == os.fspath(paths.data_dir())
  assert t2t.data_directory("/x") == "/x"
