"""`bertjax.fine_tune` on your own CSV / TSV / JSONL / CoNLL-style files: the GLUE, CoNLL-2003
and SQuAD runs of `finetune.run` on them (same scores on the same rows), a model that
predicts by the files' label names, and rows it cannot use named."""
import json

import gin
import numpy as np
import pytest
import transformers

import bertjax
from bertjax.checkpoints.formats import open_model
from bertjax.evaluation import conll
from bertjax.finetune import fitting, loop, pipelines
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
                            fitting.Options(
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


def _same_run(ours: dict, theirs: dict, split: str, metric: str) -> None:
  """Two runs on the same rows: the same scores and the same training, step by step."""
  assert ours["eval"]["dev"][metric] == theirs["eval"][split][metric]
  assert [r["loss"] for r in ours["history"]] == [r["loss"] for r in theirs["history"]]
  assert ours["model"] == theirs["model"]


def test_tagged_tokens_give_the_conll_run(bert_dir, tmp_path):
  """CoNLL-2003's own files (columns) and the same sentences as JSONL train a token
  classifier as `finetune.run`'s CoNLL-2003 run does; its tags are the files'."""
  folder = tmp_path / "data" / "conll2003"
  ftl.write_conll(folder)
  conll_run = pipelines.run_ner(open_model(bert_dir), WordPiece.from_path(bert_dir),
                                fitting.Options(
                                    finetune=loop.FinetuneConfig(batch_size=4, eval_batch_size=4),
                                    max_steps=4, max_seq_length=16, data_dir=str(tmp_path / "data"),
                                    predict_test=False))
  columns = bertjax.fine_tune(bert_dir, "token_classification", str(folder / "train.txt"),
                              str(folder / "valid.txt"), labels=conll.LABELS,
                              output_dir=str(tmp_path / "columns"), **SETTINGS)
  _same_run(columns, conll_run, "dev", "f1")
  dev = (tmp_path / "columns" / "predictions" / "dev.txt").read_text()
  assert dev.startswith("a O ") and dev.count("\n\n") == len(ftl.SENTENCES)
  jsonl = tmp_path / "train.jsonl"
  jsonl.write_text("".join(json.dumps({"words": [w for w, _ in s], "ner": [t for _, t in s]}) + "\n"
                           for s in ftl.SENTENCES * 4))
  (tmp_path / "dev.jsonl").write_text(jsonl.read_text() + json.dumps(
      {"words": ["a", "cat"], "ner": ["O", "B-ANIMAL"]}) + "\n")
  own = bertjax.fine_tune(bert_dir, "token_classification", str(jsonl),
                          str(tmp_path / "dev.jsonl"), text="words", label="ner",
                          output_dir=str(tmp_path / "jsonl"), **SETTINGS)
  assert own["eval"]["dev"]["sentences"] == 12 and own["skipped"]["count"] == 1
  assert "'B-ANIMAL' is not one of the model's tags" in own["skipped"]["summary"]
  labels = tuple(open_model(str(tmp_path / "jsonl")).config.labels)
  assert labels == ("O", "B-LOC", "B-MISC", "B-PER", "I-LOC")  # the files' own, sorted
  tags = bertjax.pipeline("token-classification", str(tmp_path / "jsonl"))("a man sleeps .")
  assert {t["entity"] for t in tags} <= set(labels)


def test_questions_give_the_squad_run(bert_dir, tmp_path):
  """SQuAD's questions as JSONL rows (the datasets library's `answers`), one article to
  train and one to evaluate, train as `finetune.run`'s SQuAD run split there; rows with an
  answer the context does not hold at its start are named, and a question without an
  answer turns on SQuAD 2.0's scoring."""
  squad_file = ftl.write_squad11(tmp_path / "squad.json")
  window = dict(max_seq_length=32, doc_stride=8, max_query_length=8)
  squad_run = pipelines.run_squad("squad11", open_model(bert_dir), WordPiece.from_path(bert_dir),
                                  fitting.Options(
                                      finetune=loop.FinetuneConfig(batch_size=4,
                                                                   eval_batch_size=4),
                                      max_steps=4, squad_file=squad_file,
                                      squad_train_articles=1, **window))
  articles = json.loads((tmp_path / "squad.json").read_text())["data"]
  for name, article in zip(("train.jsonl", "dev.jsonl"), articles):
    paragraph = article["paragraphs"][0]
    (tmp_path / name).write_text("".join(json.dumps({
        "id": qa["id"], "question": qa["question"], "context": paragraph["context"],
        "answers": {"text": [a["text"] for a in qa["answers"]],
                    "answer_start": [a["answer_start"] for a in qa["answers"]]}}) + "\n"
        for qa in paragraph["qas"]))
  settings = {**SETTINGS, **window}
  ours = bertjax.fine_tune(bert_dir, "question_answering", str(tmp_path / "train.jsonl"),
                           str(tmp_path / "dev.jsonl"), output_dir=str(tmp_path / "out"),
                           **settings)
  _same_run(ours, squad_run, "held_out", "f1")
  assert ours["squad_version"] == "1.1"
  answers = json.loads((tmp_path / "out" / "predictions" / "predictions.json").read_text())
  assert sorted(answers) == ["1-0", "1-1", "1-2", "1-3"]
  assert bertjax.pipeline("question-answering", str(tmp_path / "out"))(
      {"question": "a man ?", "context": ftl.SQUAD_CONTEXT})["answer"] in ftl.SQUAD_CONTEXT
  # The flat form as a CSV: `answer` and `answer_start`; "" is no answer.
  start = ftl.SQUAD_CONTEXT.index("a dog")
  flat = tmp_path / "flat.csv"
  flat.write_text("question,context,answer,answer_start\n" +
                  f"a man ?,{ftl.SQUAD_CONTEXT},a dog,{start}\n" * 4 +
                  f"a man ?,{ftl.SQUAD_CONTEXT},a cat,{start}\n" +
                  f"who ?,{ftl.SQUAD_CONTEXT},,\n")
  unanswerable = bertjax.fine_tune(bert_dir, "question_answering", str(flat), str(flat),
                                   label="answer", output_dir=str(tmp_path / "flat"), **settings)
  assert unanswerable["squad_version"] == "2.0" and "best_f1" in unanswerable["eval"]["dev"]
  assert unanswerable["skipped"]["count"] == 2  # the 'a cat' row, in both files
  assert "flat.csv:6: answer 'a cat' is not the context's text" in unanswerable["skipped"][
      "summary"]


def test_bad_tag_and_question_files_are_named(bert_dir, tmp_path):
  tags = tmp_path / "tags.conll"
  tags.write_text("John PER\nsleeps O\n\nMary B-PER\n")
  with pytest.raises(ValueError, match=r"tags\.conll: all 2 sentences were rejected .*line 1: "
                                       r"tag 'PER' is not one of the entity tags"):
    bertjax.fine_tune(bert_dir, "token_classification", str(tags), str(tags),
                      labels=["O", "B-LOC"])
  with pytest.raises(ValueError, match=r"labels=\['O', 'O'\]: give two labels or more, each "):
    bertjax.fine_tune(bert_dir, "token_classification", str(tags), str(tags), labels=["O", "O"])
  tags.write_text("John B-PER\nMary\n")
  with pytest.raises(ValueError, match=r"line 2: a line needs the token and its tag \(found "
                                       r"'Mary'\); sentence skipped. Put the tag in the last"):
    bertjax.fine_tune(bert_dir, "token_classification", str(tags), str(tags))
  questions = tmp_path / "questions.jsonl"
  questions.write_text(json.dumps({"question": "who ?", "context": "a man"}) + "\n")
  with pytest.raises(ValueError, match=r"line 1: no answer 'answers': give 'answers' as"):
    bertjax.fine_tune(bert_dir, "question_answering", str(questions), str(questions))
  with pytest.raises(ValueError, match=r"labels=.*a question_answering model has no labels"):
    bertjax.fine_tune(bert_dir, "question_answering", str(questions), str(questions),
                      labels=["a"])
