"""The fine-tuning CLI end to end on a tiny converted checkpoint, and encoder loading."""
import csv
import dataclasses
import json
import os

import gin
import jax
import numpy as np
import pytest
import transformers

from bertjax.checkpoints import encoders
from bertjax.checkpoints.formats import open_model
from bertjax.finetune import fitting, loop, run
from bertjax.finetune.tokenization import WordPiece
from bertjax.checkpoints import converted as hf_checkpoint
from bertjax.checkpoints import model as hf_model
from bertjax.train import loop as train_loop
from tests.helpers import finetune as ftl

WORDS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "man", "sleeps", "person", "dog",
         "cat", "it", "rains", "is", "dry", "."]


@pytest.fixture(autouse=True)
def _clean_gin():
  gin.clear_config()
  yield
  gin.clear_config()


def _tiny_hf(directory, architecture):
  config = transformers.BertConfig(vocab_size=len(WORDS), hidden_size=16, num_hidden_layers=2,
                                   num_attention_heads=2, intermediate_size=32,
                                   max_position_embeddings=64)
  getattr(transformers, architecture)(config).save_pretrained(directory)
  with open(os.path.join(directory, "vocab.txt"), "w") as f:
    f.write("\n".join(WORDS) + "\n")
  return str(directory)


def test_encoder_is_found_inside_a_pretraining_wrapper(tmp_path):
  path = _tiny_hf(tmp_path / "pretraining", "BertForPreTraining")
  encoder = encoders.base_encoder(open_model(path))
  assert type(encoder.module).__name__ == "BertModel" and encoder.tokenizer_dir == path
  wrapped = hf_model.from_hf(path).params["bert"]
  jax.tree.map(np.testing.assert_array_equal, encoder.params, jax.tree.map(np.asarray, wrapped))
  with pytest.raises(FileNotFoundError):
    encoders.base_encoder(open_model(str(tmp_path / "missing")))


@pytest.mark.slow
def test_cli_trains_evaluates_and_counts_skipped_rows(tmp_path):
  hf_dir = _tiny_hf(tmp_path / "hf", "BertModel")
  ckpt = str(tmp_path / "ckpt")
  # What `python -m bertjax.convert --from_hf=... --out=...` writes.
  hf_checkpoint.save(hf_model.from_hf(hf_dir), ckpt, tokenizer_from=hf_dir)
  rte = tmp_path / "data" / "glue" / "RTE"
  rte.mkdir(parents=True)
  rows = ["index\tsentence1\tsentence2\tlabel"]
  for i in range(12):
    rows.append(f"{i}\ta man sleeps .\ta person sleeps .\t{'entailment' if i % 2 else 'not_entailment'}")
  rows.insert(3, "99\tbroken row\tentailment")  # line 4: a missing field
  (rte / "train.tsv").write_text("\n".join(rows) + "\n")
  (rte / "dev.tsv").write_text("\n".join(rows[:6] + ["7\ta cat .\ta dog .\tunknown"]) + "\n")
  out = tmp_path / "out"
  run.FLAGS(["run", "--task=rte", f"--checkpoint={ckpt}", f"--output_dir={out}",
               f"--data_dir={tmp_path / 'data'}", "--max_steps=2", "--batch_size=4",
               "--max_seq_length=16", "--eval_batch_size=4"])
  try:
    run.main([])
  finally:
    run.FLAGS.unparse_flags()
  report = json.loads((out / "results.json").read_text())
  assert report["train_steps"] == 2 and report["train_rows"] == 12
  assert report["eval"]["dev"]["examples"] == 4 and 0.0 <= report["eval"]["dev"]["accuracy"] <= 1.0
  # train.tsv line 4 and dev.tsv line 4 (bad field count), dev.tsv line 7 (bad label).
  assert report["skipped"]["count"] == 3
  assert "train.tsv: 1" in report["skipped"]["summary"] and "dev.tsv: 2" in report["skipped"]["summary"]
  assert report["command"].startswith("python -m bertjax.finetune.run")


@pytest.mark.slow
def test_squad20_and_swag_pipelines_on_official_format_files(tmp_path):
  """The task files the shared data lacks (SQuAD 2.0, SWAG), built in their official formats."""
  hf_dir = _tiny_hf(tmp_path / "hf", "BertModel")
  encoder = encoders.base_encoder(open_model(hf_dir))
  tokenizer = WordPiece.from_path(hf_dir)
  context = "a man sleeps . it rains . a dog is dry ."
  articles = []
  for a in range(2):
    qas = [{"id": f"{a}-{q}", "question": "a man ?", "is_impossible": q % 2 == 1,
            "answers": [] if q % 2 else [{"text": "a dog", "answer_start": context.index("a dog")}]}
           for q in range(4)]
    articles.append({"title": str(a), "paragraphs": [{"context": context, "qas": qas}]})
  squad_file = tmp_path / "train-v2.0.json"
  squad_file.write_text(json.dumps({"version": "v2.0", "data": articles}))
  (tmp_path / "swag").mkdir()
  for split in ("train", "val"):
    with open(tmp_path / "swag" / f"{split}.csv", "w", newline="") as f:
      writer = csv.writer(f)
      writer.writerow(["", "video-id", "fold-ind", "startphrase", "sent1", "sent2", "gold-source",
                       "ending0", "ending1", "ending2", "ending3", "label"])
      for i in range(8):
        writer.writerow([i, "v", i, "a man", "a man sleeps .", "a", "gold", "dog .", "cat .",
                         "man .", "person .", i % 4])
  options = fitting.Options(finetune=loop.FinetuneConfig(batch_size=4, eval_batch_size=4),
                            max_steps=2, max_seq_length=32, doc_stride=8, max_query_length=8,
                            squad_file=str(squad_file), squad_train_articles=1,
                            data_dir=str(tmp_path))
  squad_out = tmp_path / "squad_out"
  report = run.run_task("squad20", encoder, tokenizer,
                        dataclasses.replace(options, output_dir=str(squad_out)))
  squad = report["eval"]["held_out"]
  assert squad["questions"] == 4 and squad["HasAns_total"] == 2 and squad["NoAns_total"] == 2
  assert "best_f1_thresh" in squad and 0.0 <= squad["best_f1"] <= 100.0
  assert report["selection_metric"] == "held_out/best_f1"
  # The official v2.0 script's inputs: answers ("" = none) and no-answer odds per question.
  answers = json.loads((squad_out / "predictions" / "predictions.json").read_text())
  odds = json.loads((squad_out / "predictions" / "null_odds.json").read_text())
  assert sorted(answers) == sorted(odds) == ["1-0", "1-1", "1-2", "1-3"]
  assert all(a == "" or a in context for a in answers.values())
  swag_out = tmp_path / "swag_out"
  report = run.run_task("swag", encoder, tokenizer,
                        dataclasses.replace(options, output_dir=str(swag_out)))
  swag = report["eval"]["val"]
  assert swag["examples"] == 8 and 0.0 <= swag["accuracy"] <= 1.0
  with open(swag_out / "predictions" / "swag_val.csv", newline="") as f:
    rows = list(csv.reader(f))
  assert rows[0] == ["pred"] and len(rows) == 9
  predicted = np.array([int(r[0]) for r in rows[1:]])
  assert np.mean(predicted == np.arange(8) % 4) == swag["accuracy"]


@pytest.mark.slow
def test_nonfinite_finetuning_stops_before_anything_is_selected_or_predicted(tmp_path):
  hf_dir = _tiny_hf(tmp_path / "hf", "BertModel")
  ckpt = str(tmp_path / "ckpt")
  hf_checkpoint.save(hf_model.from_hf(hf_dir), ckpt, tokenizer_from=hf_dir)
  data_dir = ftl.write_rte(tmp_path / "data", train_rows=48, dev_rows=4, test_rows=4)
  out = tmp_path / "out"
  # One epoch of 24 steps: lr 1e6 blows the weights up long before its end.
  run.FLAGS(["run", "--task=rte", f"--checkpoint={ckpt}", f"--output_dir={out}",
             f"--data_dir={data_dir}", "--batch_size=2", "--eval_batch_size=4",
             "--max_seq_length=16", "--log_every=1", "--learning_rate=1e6", "--num_epochs=1"])
  try:
    with pytest.raises(train_loop.NonFiniteLossError,
                       match=r"NaN/Inf at step \d+\. Stopped; .*Lower "
                             r"FinetuneConfig.learning_rate \(now 1e\+06\)"):
      run.main([])
  finally:
    run.FLAGS.unparse_flags()
  assert not (out / "predictions").exists() and not list((out / "checkpoints").glob("*"))
  assert not (out / "results.json").exists()
  rows = [json.loads(l) for l in (out / "metrics.jsonl").read_text().splitlines()]
  assert all(r["split"] == "train" and r["nonfinite"] == 0 for r in rows)  # only good steps
