"""`bertjax.fine_tune` on your own CSV / TSV / JSONL files: the GLUE run of `finetune.run`
on them (same scores on the same rows), a model that predicts by the files' label names,
and rows it cannot use named."""
import json

import gin
import numpy as np
import pytest
import transformers

import bertjax
from bertjax.checkpoints.formats import open_model
from bertjax.finetune import loop, pipelines
from bertjax.finetune.tokenization import WordPiece
from tests.helpers import finetune as ftl

TINY = dict(vocab_size=len(ftl.WORDS), hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
            intermediate_size=32, max_position_embeddings=64)
SETTINGS = dict(batch_size=4, eval_batch_size=4, max_steps=4, max_seq_length=16)


@pytest.fixture(autouse=True)
def _clean_gin():
  gin.clear_config()
  yield
  gin.clear_config()


@pytest.fixture(scope="module")
def bert_dir(tmp_path_factory) -> str:
  directory = tmp_path_factory.mktemp("bert")
  transformers.BertModel(transformers.BertConfig(**TINY)).save_pretrained(directory)
  ftl.write_vocab(directory)
  return str(directory)


def test_glue_files_give_the_glue_run(bert_dir, tmp_path):
  """RTE's own TSVs through fine_tune (its columns named) score as `finetune.run`'s RTE
  run does, epoch by epoch: the same rows, labels, head and training."""
  data = tmp_path / "data"
  ftl.write_rte(data, train_rows=8, dev_rows=4)
  folder = data / "glue" / "RTE"
  ours = bertjax.fine_tune(bert_dir, "classification", str(folder / "train.tsv"),
                           str(folder / "dev.tsv"), text="sentence1", text_pair="sentence2",
                           output_dir=str(tmp_path / "own"), **SETTINGS)
  glue = pipelines.run_glue("rte", open_model(bert_dir), WordPiece.from_path(bert_dir),
                            pipelines.Options(
                                finetune=loop.FinetuneConfig(batch_size=4, eval_batch_size=4),
                                max_steps=4, max_seq_length=16, data_dir=str(data),
                                output_dir=str(tmp_path / "glue")))
  assert ours["eval"]["dev"]["accuracy"] == glue["eval"]["dev"]["accuracy"]
  assert [r["loss"] for r in ours["history"]] == [r["loss"] for r in glue["history"]]
  assert ours["exported_as"] == "BertForSequenceClassification"
  saved = json.loads((tmp_path / "own" / "results.json").read_text())
  assert saved["task"] == "classification" and saved["train_rows"] == 8
  assert (tmp_path / "own" / "loss_curve.png").is_file()
  dev = (tmp_path / "own" / "predictions" / "dev.tsv").read_text().splitlines()
  assert dev[0] == "index\tprediction" and len(dev) == 5
  assert {line.split("\t")[1] for line in dev[1:]} <= {"entailment", "not_entailment"}
  with pytest.raises(ValueError, match=r"output_dir=.*own.*overwrite"):  # as finetune.run
    bertjax.fine_tune(bert_dir, "classification", str(folder / "train.tsv"),
                      str(folder / "dev.tsv"), text="sentence1", text_pair="sentence2",
                      output_dir=str(tmp_path / "own"), **SETTINGS)


def test_csv_and_jsonl_files_train_a_classifier_named_by_their_labels(bert_dir, tmp_path):
  train, dev = tmp_path / "train.csv", tmp_path / "dev.jsonl"
  rows = [("a man sleeps .", "sleep"), ("it rains .", "rain"), ("a dog is dry .", "dry")] * 4
  train.write_text("review,mood\n" + "".join(f'"{t}",{m}\n' for t, m in rows))
  dev.write_text("".join(json.dumps({"review": t, "mood": m}) + "\n" for t, m in rows[:3]) +
                 json.dumps({"review": "a cat", "mood": "unseen"}) + "\n")
  report = bertjax.fine_tune(bert_dir, "classification", str(train), str(dev), text="review",
                             label="mood", output_dir=str(tmp_path / "out"), **SETTINGS)
  assert report["eval"]["dev"]["examples"] == 3
  assert report["skipped"]["count"] == 1 and "unseen" in report["skipped"]["summary"]
  assert tuple(open_model(str(tmp_path / "out")).config.labels) == ("dry", "rain", "sleep")
  found = bertjax.pipeline("text-classification", str(tmp_path / "out"))("a man sleeps .")
  assert found["label"] in ("dry", "rain", "sleep")


def test_a_score_trains_a_regressor_of_the_score(bert_dir, tmp_path):
  train = tmp_path / "train.tsv"
  train.write_text("text\tscore\n" + "a man sleeps .\t4.5\nit rains .\t1.0\n" * 4)
  report = bertjax.fine_tune(bert_dir, "regression", str(train), str(train), label="score",
                             output_dir=str(tmp_path / "out"), **SETTINGS)
  assert set(report["eval"]["dev"]) >= {"pearson", "spearman"}
  scores = [float(line.split("\t")[1]) for line in
            (tmp_path / "out" / "predictions" / "dev.tsv").read_text().splitlines()[1:]]
  predicted = bertjax.pipeline("text-classification", str(tmp_path / "out"))(
      ["a man sleeps .", "it rains ."])
  assert np.allclose([p["score"] for p in predicted], scores[:2], atol=1e-3)


def test_bad_files_and_settings_are_named(bert_dir, tmp_path):
  train = tmp_path / "train.csv"
  train.write_text("text,label\na man sleeps .,x\nit rains .,x\n")
  with pytest.raises(ValueError, match="a classifier needs two labels"):
    bertjax.fine_tune(bert_dir, "classification", str(train), str(train))
  with pytest.raises(ValueError, match=r"all 2 rows with 'sentence' and 'label' were rejected"):
    bertjax.fine_tune(bert_dir, "classification", str(train), str(train), text="sentence")
  with pytest.raises(ValueError, match=r"Unknown settings \['learning_rte'\]"):
    bertjax.fine_tune(bert_dir, "classification", str(train), str(train), learning_rte=1e-3)
  with pytest.raises(ValueError, match=r"give a \.csv, \.tsv or \.jsonl"):
    bertjax.fine_tune(bert_dir, "classification", str(tmp_path / "train.txt"), str(train))
