"""CoNLL-2003 runs write conlleval input (dev, and test scored with the selected
params); feature-based runs select each tagger by epoch and write its predictions."""
import os

import numpy as np
import pytest
import transformers

from bertjax.evaluation import conll
from bertjax.checkpoints import encoders
from bertjax.checkpoints.formats import open_model
from bertjax.finetune import fitting, loop, pipelines
from bertjax.finetune.tokenization import WordPiece
from bertjax.checkpoints import converted as hf_checkpoint
from bertjax.checkpoints import model as hf_model
from tests.helpers import finetune as ftl

@pytest.fixture(scope="module")
def setup(tmp_path_factory):
  root = tmp_path_factory.mktemp("ner")
  hf_dir = str(root / "hf")
  transformers.BertModel(transformers.BertConfig(
      vocab_size=len(ftl.WORDS), hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
      intermediate_size=32, max_position_embeddings=32)).save_pretrained(hf_dir)
  ckpt = str(root / "ckpt")
  hf_checkpoint.save(hf_model.from_hf(hf_dir), ckpt)
  vocab = ftl.write_vocab(ckpt)
  ftl.write_conll(root / "data" / "conll2003")
  return root, encoders.base_encoder(open_model(ckpt)), WordPiece.from_path(vocab)


def _options(root, out, **finetune):
  return fitting.Options(
      finetune=loop.FinetuneConfig(batch_size=4, eval_batch_size=4, **finetune),
      max_seq_length=16, data_dir=str(root / "data"), output_dir=str(out))


def _read_conlleval(path):
  gold, predicted, g, p = [], [], [], []
  for line in open(path).read().split("\n"):
    if line:
      word, gold_tag, tag = line.split(" ")
      g.append(gold_tag)
      p.append(tag)
    elif g:
      gold.append(g)
      predicted.append(p)
      g, p = [], []
  return gold, predicted


def test_ner_run_writes_dev_and_test_in_conlleval_format(setup, tmp_path):
  root, encoder, tokenizer = setup
  report = pipelines.run_ner(encoder, tokenizer, _options(root, tmp_path, num_epochs=2.0))
  assert [e["epoch"] for e in report["epochs"]] == [1.0, 2.0]
  assert report["selection_metric"] == "dev/f1"
  for split in ("dev", "test"):
    gold, predicted = _read_conlleval(str(tmp_path / "predictions" / f"conll2003_{split}.txt"))
    assert gold == [[t for _, t in s] for s in ftl.SENTENCES]
    # Scoring the written file gives the reported numbers (the selected params').
    scores = conll.entity_scores(gold, predicted)
    assert scores["f1"] == pytest.approx(report["eval"][split]["f1"])
  assert report["eval"]["dev"]["f1"] == report["best_epoch"]["value"]


@pytest.mark.slow
def test_feature_based_taggers_are_selected_per_mode(setup, tmp_path):
  root, encoder, tokenizer = setup
  report = pipelines.run_feature_based(encoder, tokenizer,
                                       _options(root, tmp_path, learning_rate=1e-2), "last")
  last = report["eval"]["last"]
  assert last["best_epoch"]["step"] in [e["step"] for e in last["epochs"]]
  assert os.listdir(tmp_path / "feature_last" / "checkpoints") == [str(last["best_epoch"]["step"])]
  gold, predicted = _read_conlleval(str(tmp_path / "predictions" / "conll2003_dev_last.txt"))
  assert conll.entity_scores(gold, predicted)["f1"] == pytest.approx(last["f1"])
  assert np.isfinite(last["f1"])
