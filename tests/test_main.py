"""The `python -m bertjax.main` entry point: configs written, modes, and bad gin files
failing before any compute with the binding named."""
import os
import subprocess
import sys

import gin
import pytest

from bertjax import main
from tests import helpers
from tests.helpers import trainer as tl


@pytest.fixture(autouse=True)
def _clean_gin():
  gin.clear_config()
  yield
  gin.clear_config()


def _nothing_computed(model_dir):
  steps = os.path.join(model_dir, "checkpoints")
  return (not os.path.exists(os.path.join(model_dir, "metrics.jsonl"))
          and (not os.path.exists(steps) or not [d for d in os.listdir(steps) if d.isdigit()]))


def test_unknown_name_in_gin_file_fails_from_the_command_line(tmp_path):
  bad = tmp_path / "bad.gin"
  bad.write_text("include 'quickstart.gin'\nTrainer.num_train_stepz = 10\n")
  proc = subprocess.run(
      [sys.executable, "-m", "bertjax.main", f"--gin_file={bad}", f"--model_dir={tmp_path / 'run'}"],
      cwd=tl.REPO, capture_output=True, text=True, timeout=300,
      env=dict(os.environ, XLA_FLAGS=helpers.xla_flags(1)))
  assert proc.returncode != 0
  assert "Bad gin config" in proc.stderr and "num_train_stepz" in proc.stderr
  assert _nothing_computed(str(tmp_path / "run"))


@pytest.mark.parametrize("binding, message", [
    ("Trainer.num_train_steps = 'ten'", r"Trainer.num_train_steps = 'ten': expected int"),
    ("Trainer.num_train_steps = %gin.REQUIRED", r"Trainer.num_train_steps"),
    ("build_model.config_overrides = {'hiden_size': 8}", r"hiden_size.*not fields of BertConfig"),
    ("build_model.config_overrides = {'num_layers': 'two'}", r"\['num_layers'\] = 'two': expected int"),
    ("build_model.config = 'bertjax.models.bert.bert_huge'", r"build_model.config.*bert_huge"),
    ("Trainer.on_nonfinite = 'ignore'", r"Trainer.on_nonfinite"),
    ("adamw.beta2 = 0.98", r"adamw.*beta2"),
])
def test_bad_binding_fails_before_compute_naming_it(tmp_path, binding, message):
  with pytest.raises(ValueError, match=message):
    tl.configure(binding)
    main.run(str(tmp_path), "train")
  assert _nothing_computed(str(tmp_path))


def test_missing_required_binding_is_named(tmp_path):
  gin.clear_config()
  main.parse_gin(["models/bert_tiny.gin", "objectives/mlm_nsp.gin"], [])
  with pytest.raises(ValueError, match=r"Missing required gin binding\(s\): "
                     r"Trainer.num_train_steps, Trainer.batch_size"):
    main.run(str(tmp_path), "train")
  assert _nothing_computed(str(tmp_path))


@pytest.mark.slow
def test_train_then_evaluate_writes_configs_and_results(tmp_path):
  tl.configure("Trainer.num_train_steps = 2", "Trainer.checkpoint_every = 2")
  summary = main.run(str(tmp_path), "train")
  assert summary["step"] == 2
  config = (tmp_path / main.CONFIG_FILE).read_text()
  assert "Trainer.num_train_steps = 2" in config
  assert "build_model.config = 'bertjax.models.bert.bert_tiny'" in config
  assert "adamw.b2 = 0.999" in (tmp_path / main.OPERATIVE_CONFIG_FILE).read_text()
  results = main.run(str(tmp_path), "evaluate")
  assert 0.0 <= results["mlm_accuracy"] <= 1.0 and results["eval_batches"] == 2
  assert (tmp_path / "results.json").exists()


@pytest.mark.slow
def test_quickstart_config_trains(tmp_path):
  """gin/quickstart.gin on the embedded corpus, cut to a few small steps."""
  main.parse_gin(["quickstart.gin"], [
      "Trainer.num_train_steps = 30", "Trainer.batch_size = 8", "Trainer.sequence_length = 64",
      "Trainer.log_every = 5", "Trainer.checkpoint_every = 30", "Trainer.eval_every = 0",
      "Trainer.eval_steps = 2", "Trainer.show_progress = False",
      "warmup_linear_decay.warmup_steps = 5"])
  summary = main.run(str(tmp_path), "train_and_evaluate")
  losses = [r["loss"] for r in tl.metrics(str(tmp_path))]
  assert losses[-1] < losses[0] - 0.5, losses
  assert summary["step"] == 30 and 0.0 <= summary["eval"]["mlm_accuracy"] <= 1.0
  assert os.path.exists(summary["loss_curve"])
