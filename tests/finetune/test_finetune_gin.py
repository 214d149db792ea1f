"""Fine-tuning runs from gin: every task file builds, flags are shorthands for bindings,
bad configs fail before anything loads, and a run from a gin file evaluates each
epoch, keeps the best one and writes the GLUE server files."""
import json
import os
import sys

import gin
import numpy as np
import pytest
import transformers

from bertjax import paths
from bertjax.evaluation import glue
from bertjax.finetune import run, submission
from bertjax.checkpoints import converted as hf_checkpoint
from bertjax.checkpoints import model as hf_model
from tests.helpers import finetune as ftl

GIN_DIR = paths.gin_dir() / "finetune"
CHECKPOINT = "FinetuneRun.init_checkpoint = '/ckpt'"


@pytest.fixture(autouse=True)
def _clean_gin():
  gin.clear_config()
  yield
  gin.clear_config()
  run.FLAGS.unparse_flags()


def test_every_task_file_builds_with_berts_recipe():
  files = sorted(p.name for p in GIN_DIR.glob("*.gin") if p.name != "base.gin")
  assert files == sorted([f"glue_{t}.gin" for t in glue.TASKS] + [
      "squad11.gin", "squad20.gin", "conll2003.gin", "conll2003_feature_based.gin", "swag.gin"])
  for name in files:
    gin.clear_config()
    config, options = run.configure([f"finetune/{name}"], [CHECKPOINT])
    expected_task = name[len("glue_"):-4] if name.startswith("glue_") else name[:-4]
    assert config.task == expected_task.replace("_feature_based", ""), name
    recipe = options.finetune
    assert recipe.learning_rate in (2e-5, 3e-5, 5e-5) or config.feature_mode, name
    assert recipe.warmup_fraction == 0.1 and 2 <= recipe.num_epochs <= 4, name
    assert options.eval_each_epoch and options.predict_test, name
    assert recipe.batch_size == {"squad20": 48, "swag": 16}.get(config.task, 32), name
  assert options.max_seq_length == 128  # the last file (swag)
  gin.clear_config()
  _, squad20 = run.configure(["finetune/squad20.gin"], [CHECKPOINT])
  assert (squad20.max_seq_length, squad20.doc_stride, squad20.finetune.num_epochs) == (384, 128, 2.0)


def test_flags_are_shorthands_for_gin_bindings():
  run.FLAGS(["run", "--gin_file=finetune/glue_sst2.gin", "--checkpoint=/c", "--learning_rate=2e-5",
             "--max_steps=0", "--max_train_examples=100", "--gin_bindings=Options.pooling = 'cls'"])
  assert run.flag_bindings() == ["FinetuneRun.init_checkpoint = '/c'",
                                 "Options.max_train_examples = 100", "Options.max_steps = None",
                                 "FinetuneConfig.learning_rate = 2e-05"]
  config, options = run.configure(run.FLAGS.gin_file, run.FLAGS.gin_param + run.flag_bindings())
  assert (config.task, config.init_checkpoint) == ("sst2", "/c")
  assert options.finetune.learning_rate == 2e-5       # the flag overrides the gin file
  assert options.finetune.batch_size == 32            # left to base.gin
  assert (options.max_steps, options.max_train_examples, options.pooling) == (None, 100, "cls")
  # Every shorthand names a real parameter (gin rejects unknown names when parsing).
  gin.clear_config()
  gin.parse_config([f"{p} = None" for p in run.FLAG_BINDINGS.values()])
  assert all(run.FLAGS[f].default is None for f in run.FLAG_BINDINGS)


def test_help_lists_the_gin_and_shorthand_flags(capsys, monkeypatch):
  monkeypatch.setattr(sys, "argv", ["run", "--help"])
  with pytest.raises(SystemExit) as done:
    run.command()
  assert done.value.code == 0
  text = capsys.readouterr().out
  assert "--gin_file" in text and "--learning_rate" in text and "FinetuneConfig.learning_rate" in text
  assert "--gin_bindings" in text and "--gin_param" in text  # the older spelling, an alias


@pytest.mark.parametrize("args, message", [
    (["--gin_param=FinetuneConfig.lerning_rate = 1e-5"], "doesn't have a parameter named 'lerning_rate'"),
    (["--gin_param=FinetuneConfig.batch_size = 'big'"], "FinetuneConfig.batch_size = 'big': expected int"),
    (["--gin_param=Options.max_seq_length = 1.5"], "Options.max_seq_length = 1.5: expected int"),
    (["--task=squad3"], "FinetuneRun.task = 'squad3'"),
    (["--feature_mode=last"], "feature_mode is implemented for task 'conll2003'"),
    (["--gin_file=finetune/glue_nope.gin"], "glue_nope.gin"),
])
def test_bad_config_fails_before_anything_loads(tmp_path, args, message):
  out = tmp_path / "out"
  run.FLAGS(["run", "--gin_file=finetune/glue_mrpc.gin", f"--checkpoint={tmp_path / 'none'}",
             f"--output_dir={out}", *args])
  with pytest.raises(SystemExit, match="Bad fine-tuning config") as error:
    run.main([])
  assert message in str(error.value)
  assert not out.exists()


def test_missing_checkpoint_binding_is_named():
  run.FLAGS(["run", "--gin_file=finetune/glue_mrpc.gin"])
  with pytest.raises(SystemExit, match="FinetuneRun.init_checkpoint"):
    run.main([])


def test_run_from_gin_selects_the_best_epoch_and_writes_glue_server_files(tmp_path):
  hf_dir = str(tmp_path / "hf")
  transformers.BertModel(transformers.BertConfig(
      vocab_size=len(ftl.WORDS), hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
      intermediate_size=32, max_position_embeddings=32)).save_pretrained(hf_dir)
  ckpt = str(tmp_path / "ckpt")
  hf_checkpoint.save(hf_model.from_hf(hf_dir), ckpt)
  ftl.write_vocab(ckpt)
  data_dir = ftl.write_rte(tmp_path / "data", train_rows=8, dev_rows=4, test_rows=4)
  out = tmp_path / "out"
  run.FLAGS(["run", "--gin_file=finetune/glue_rte.gin", f"--checkpoint={ckpt}",
             f"--output_dir={out}", f"--data_dir={data_dir}", "--learning_rate=1e-3",
             "--gin_param=FinetuneConfig.batch_size = 4",
             "--gin_param=FinetuneConfig.eval_batch_size = 4",
             "--gin_param=Options.max_seq_length = 16"])
  run.main([])
  report = json.loads((out / "results.json").read_text())
  assert report["train_steps"] == 6 and report["selection_metric"] == "dev/accuracy"
  epochs = report["epochs"]
  assert [(e["epoch"], e["step"]) for e in epochs] == [(1.0, 2), (2.0, 4), (3.0, 6)]
  accuracies = [e["eval"]["dev"]["accuracy"] for e in epochs]
  best = max(range(3), key=lambda i: (accuracies[i], i))  # ties: the later epoch
  assert report["best_epoch"] == {"epoch": best + 1.0, "step": 2 * (best + 1),
                                  "value": accuracies[best]}
  assert report["eval"]["dev"]["accuracy"] == accuracies[best]
  rows = [json.loads(l) for l in (out / "metrics.jsonl").read_text().splitlines()]
  assert [r["accuracy"] for r in rows if r["split"] == "dev"] == accuracies
  # One copy of the weights, the best epoch's (its predictions below), in OUT itself.
  assert not (out / "checkpoints").exists() and (out / "params").is_dir()
  assert (out / "loss_curve.png").stat().st_size > 0
  assert "FinetuneRun.task = 'rte'" in (out / "config.gin").read_text()
  # The dev file holds the best epoch's predictions: its accuracy is the reported one.
  dev = submission.read_glue(str(out / "predictions" / "dev" / "RTE.tsv"))
  gold = ["not_entailment", "entailment"] * 2
  assert list(dev) == ["0", "1", "2", "3"]
  assert np.mean([dev[str(i)] == g for i, g in enumerate(gold)]) == accuracies[best]
  test = submission.read_glue(str(out / "predictions" / "test" / "RTE.tsv"))
  assert list(test) == ["0", "1", "2", "3"]
  assert set(test.values()) <= {"entailment", "not_entailment"}
