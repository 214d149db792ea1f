"""A fine-tuning run's best model is its family's transformers task class: exported, it
keeps the task's labels (id2label / label2id, problem_type) and transformers' pipelines
run on it with our outputs; a checkpoint of the class continues with its head, and one
whose head or class does not fit stops before anything trains."""
import json
import os
import re

import gin
import numpy as np
import pytest
import torch
import transformers

from bertjax.checkpoints.formats import open_model
from bertjax.evaluation import conll, glue as glue_eval
from bertjax.finetune import fitting, loop, pipelines, run, task_models
from bertjax.finetune.tokenization import WordPiece
from bertjax.tools import convert
from tests.helpers import finetune as ftl

TOL = 1e-4
NLI = ("entailment", "not_entailment")
TINY = dict(vocab_size=len(ftl.WORDS), hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
            intermediate_size=32, max_position_embeddings=64)


@pytest.fixture(autouse=True)
def _clean_gin():
  gin.clear_config()
  yield
  gin.clear_config()


def _tiny_hf(directory, architecture="BertModel", **config) -> str:
  """A random tiny BERT of `architecture` with a WordPiece vocabulary over ftl.WORDS."""
  getattr(transformers, architecture)(transformers.BertConfig(**TINY, **config)).save_pretrained(
      directory)
  ftl.write_vocab(directory)
  return str(directory)


@pytest.fixture(scope="module")
def bert_dir(tmp_path_factory) -> str:
  return _tiny_hf(tmp_path_factory.mktemp("bert"))


def _options(tmp_path, **kwargs) -> fitting.Options:
  return fitting.Options(finetune=loop.FinetuneConfig(batch_size=4, eval_batch_size=4),
                         max_steps=2, data_dir=str(tmp_path / "data"),
                         output_dir=str(tmp_path / "out"), **{"max_seq_length": 16, **kwargs})


def _export(tmp_path) -> tuple[str, dict]:
  """`python -m bertjax.convert --to_hf` of the run's output folder; its config.json."""
  hf_dir = str(tmp_path / "exported")
  convert.to_hf(str(tmp_path / "out"), hf_dir)
  with open(os.path.join(hf_dir, "config.json")) as f:
    return hf_dir, json.load(f)


def _ours(model_dir: str, hf_dir: str, *texts) -> tuple[dict, dict]:
  """Our outputs on the exported tokenizer's encoding of `texts`, and that encoding."""
  encoded = dict(transformers.AutoTokenizer.from_pretrained(hf_dir)(*texts, return_tensors="np"))
  return open_model(model_dir)(**encoded), encoded


def _softmax(x: np.ndarray) -> np.ndarray:
  e = np.exp(x - x.max(-1, keepdims=True))
  return e / e.sum(-1, keepdims=True)


def test_glue_run_exports_a_text_classifier(bert_dir, tmp_path):
  ftl.write_rte(tmp_path / "data", train_rows=8, dev_rows=4)
  report = pipelines.run_glue("rte", open_model(bert_dir), WordPiece.from_path(bert_dir),
                              _options(tmp_path))
  assert report["exported_as"] == "BertForSequenceClassification"
  assert report["model"] == "BertForSequenceClassification (fresh head)"
  hf_dir, config = _export(tmp_path)
  assert config["architectures"] == ["BertForSequenceClassification"]
  assert config["id2label"] == {"0": "entailment", "1": "not_entailment"}
  assert config["label2id"] == {"entailment": 0, "not_entailment": 1}
  assert config["problem_type"] == "single_label_classification"
  ours, _ = _ours(str(tmp_path / "out"), hf_dir, "a man sleeps .", "a person sleeps .")
  classify = transformers.pipeline("text-classification", model=hf_dir)
  scores = classify({"text": "a man sleeps .", "text_pair": "a person sleeps ."}, top_k=None)
  assert {s["label"] for s in scores} == set(NLI)
  expected = _softmax(ours["logits"][0])
  for s in scores:
    assert abs(s["score"] - expected[NLI.index(s["label"])]) < TOL


def test_stsb_run_exports_a_regressor_of_the_score_itself(bert_dir, tmp_path):
  ftl.write_stsb(tmp_path / "data")
  report = pipelines.run_glue("stsb", open_model(bert_dir), WordPiece.from_path(bert_dir),
                              _options(tmp_path))
  assert report["exported_as"] == "BertForSequenceClassification"
  hf_dir, config = _export(tmp_path)
  assert config["problem_type"] == "regression" and config["id2label"] == {"0": "score"}
  # Trained on (score - 2.5) / 2.5, the exported head (the run's one copy of its weights)
  # outputs the score; fine-tuning the export again continues its head, in training units.
  assert not os.path.exists(tmp_path / "out" / "checkpoints")
  again = task_models.build(open_model(str(tmp_path / "out")), task_models.SEQUENCE, ("score",),
                            regression=(2.5, 2.5))
  assert again.description == "BertForSequenceClassification (continued head)"
  pair = ("a man sleeps .", "a dog sleeps .")
  exported, encoded = _ours(str(tmp_path / "out"), hf_dir, *pair)
  centred = (exported["logits"][0, 0] - 2.5) / 2.5
  continued = again.module.apply({"params": again.start}, **encoded)["logits"][0, 0]
  assert abs(continued - centred) < TOL
  score = transformers.pipeline("text-classification", model=hf_dir)(
      {"text": pair[0], "text_pair": pair[1]})
  assert score["label"] == "score" and abs(score["score"] - (centred * 2.5 + 2.5)) < TOL


def test_ner_run_exports_a_token_classifier(bert_dir, tmp_path):
  ftl.write_conll(tmp_path / "data" / "conll2003")
  report = pipelines.run_ner(open_model(bert_dir), WordPiece.from_path(bert_dir),
                             _options(tmp_path))
  assert report["exported_as"] == "BertForTokenClassification"
  hf_dir, config = _export(tmp_path)
  labels = [config["id2label"][str(i)] for i in range(len(config["id2label"]))]
  assert tuple(labels) == tuple(conll.LABELS)
  ours, _ = _ours(str(tmp_path / "out"), hf_dir, "a man sleeps .")
  tags = transformers.pipeline("token-classification", model=hf_dir, ignore_labels=[])(
      "a man sleeps .")
  assert [t["word"] for t in tags] == ["a", "man", "sleeps", "."]
  probabilities = _softmax(ours["logits"][0])
  for t in tags:
    assert t["entity"] == labels[int(probabilities[t["index"]].argmax())]
    assert abs(t["score"] - probabilities[t["index"]].max()) < TOL


def test_squad_run_exports_a_question_answerer(bert_dir, tmp_path):
  squad_file = ftl.write_squad11(tmp_path / "train-v1.1.json")
  report = pipelines.run_squad("squad11", open_model(bert_dir), WordPiece.from_path(bert_dir),
                               _options(tmp_path, max_seq_length=32, doc_stride=8,
                                        max_query_length=8, squad_file=squad_file,
                                        squad_train_articles=1))
  assert report["exported_as"] == "BertForQuestionAnswering"
  hf_dir, config = _export(tmp_path)
  assert config["architectures"] == ["BertForQuestionAnswering"]
  # transformers 5 has no question-answering pipeline: its model class on the same encoding.
  ours, encoded = _ours(str(tmp_path / "out"), hf_dir, "a man ?", ftl.SQUAD_CONTEXT)
  theirs = transformers.AutoModelForQuestionAnswering.from_pretrained(hf_dir)(
      **{k: torch.tensor(v) for k, v in encoded.items()})
  for name in ("start_logits", "end_logits"):
    np.testing.assert_allclose(getattr(theirs, name).detach().numpy(), ours[name], atol=TOL)


def test_a_head_continues_on_its_labels_in_the_tasks_order(tmp_path):
  """A classifier fine-tuned elsewhere with RTE's labels the other way round."""
  path = _tiny_hf(tmp_path / "rte", "BertForSequenceClassification",
                  id2label={0: "not_entailment", 1: "entailment"})
  model = open_model(path)
  task = task_models.build(model, task_models.SEQUENCE, NLI)
  assert task.architecture == "BertForSequenceClassification" and "head" in task.start
  ids = np.array([[2, 5, 6, 7, 3, 8, 7, 3]])
  logits = task.module.apply({"params": task.start}, input_ids=ids)["logits"]
  np.testing.assert_allclose(logits, model(input_ids=ids)["logits"][:, ::-1], atol=TOL)


def test_a_head_whose_labels_the_data_spells_continues_on_them(tmp_path):
  """A classifier fine-tuned on SST-2's own files names its labels as the data spells them,
  "0" / "1" (here also the other way round); GLUE's SST-2 run names them negative /
  positive and continues that head with each output on its class (`label_values`)."""
  sst2 = glue_eval.get_task("sst2")
  ids = np.array([[2, 5, 6, 7, 3, 8, 7, 3]])
  for id2label, order in (({0: "0", 1: "1"}, [0, 1]), ({0: "1", 1: "0"}, [1, 0])):
    model = open_model(_tiny_hf(tmp_path / id2label[0], "BertForSequenceClassification",
                                id2label=id2label))
    task = task_models.build(model, task_models.SEQUENCE, sst2.names, label_values=sst2.labels)
    assert task.description == "BertForSequenceClassification (continued head)"
    assert task.config.labels == ("negative", "positive")
    logits = task.module.apply({"params": task.start}, input_ids=ids)["logits"]
    np.testing.assert_allclose(logits, model(input_ids=ids)["logits"][:, order], atol=TOL)
  with pytest.raises(ValueError, match=r"predicts 2 labels \['1', '0'\], but this task needs 2 "
                                       r"labels \['negative', 'positive'\].*--fresh_head"):
    task_models.build(model, task_models.SEQUENCE, sst2.names)  # values not given: refused
  assert "head" not in task_models.build(model, task_models.SEQUENCE, NLI,
                                         fresh_head=True).start


def test_a_head_for_other_labels_stops_before_training(tmp_path):
  path = _tiny_hf(tmp_path / "sentiment", "BertForSequenceClassification",
                  id2label={0: "negative", 1: "neutral", 2: "positive"})
  ftl.write_rte(tmp_path / "data", train_rows=8, dev_rows=4)
  message = (re.escape(os.path.join(path, "config.json")) + r".*3 labels.*needs 2 labels"
             r".*--fresh_head")
  with pytest.raises(ValueError, match=message):
    run.run(run.FinetuneRun(task="rte", init_checkpoint=path), _options(tmp_path))
  assert not os.path.exists(tmp_path / "out" / "checkpoints")
  # Token classification over the same 3 labels: not CoNLL-2003's 9 either.
  with pytest.raises(ValueError, match=r"needs 9 labels"):
    task_models.build(open_model(_tiny_hf(tmp_path / "tagger", "BertForTokenClassification",
                                          num_labels=3)), task_models.TOKENS,
                      conll.LABELS)


def test_an_unsupported_task_class_names_its_config(tmp_path):
  path = _tiny_hf(tmp_path / "nsp", "BertForNextSentencePrediction")
  message = (re.escape(os.path.join(path, "config.json")) +
             r": architecture 'BertForNextSentencePrediction' is not supported.*save_pretrained")
  with pytest.raises(ValueError, match=message):
    run.run(run.FinetuneRun(task="rte", init_checkpoint=path), _options(tmp_path))
