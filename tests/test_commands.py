"""`bertjax COMMAND`: the console script's dispatcher, every command's `--help`, the shared
flag names, and a quiet start."""
import re
import subprocess
import sys

import pytest

from bertjax import __main__ as dispatcher, paths
from tests.helpers import cli, sbert as sbert_helpers

# Flags each command's help must list (its own, the shared spellings and their aliases).
FLAGS = {
    "train": ["gin_file", "gin_bindings", "gin_param", "model_dir", "output_dir", "mode",
              "coordinator_address"],
    "finetune": ["gin_file", "gin_bindings", "gin_param", "output_dir", "model_dir", "task",
                 "checkpoint", "learning_rate"],
    "predict": ["model", "checkpoint", "task", "input", "output", "columns", "top_k"],
    "convert": ["from_hf", "out", "output_dir", "to_hf", "checkpoint"],
    "encode": ["checkpoint", "input", "output", "pooling", "progress"],
    "search": ["checkpoint", "corpus", "query", "k", "index_type"],
    "sbert": ["checkpoint", "stages", "out", "output_dir", "metrics_dir"],
    "distill": ["teacher", "targets", "augment", "out", "output_dir"],
    "distill-speed": ["teacher", "student"],
    "tables": ["scale", "out", "output_dir", "results", "workers", "verbosity"],
    "analyze attention": ["model", "checkpoint", "out", "output_dir", "input", "verbosity"],
    "analyze heads": ["model", "checkpoint", "out", "output_dir", "task"],
    "analyze probe": ["model", "checkpoint", "out", "output_dir", "tasks"],
}


def test_the_console_script_is_the_dispatcher():
  """setup.py's entry point names the function these tests run (`pip install` makes the
  `bertjax` script from it)."""
  setup = (paths.REPO_ROOT / "setup.py").read_text()
  assert '"bertjax = bertjax.__main__:main"' in setup
  assert callable(dispatcher.main)
  wanted = {"train", "finetune", "predict", "convert", "encode", "search", "analyze", "tables",
            "distill"}
  assert wanted <= set(dispatcher.COMMANDS)
  assert {name.split()[0] for name in FLAGS} == set(dispatcher.COMMANDS)


@pytest.mark.parametrize("command", list(FLAGS))
def test_every_help_exits_0_listing_every_flag_with_its_description(command):
  shown = cli.run_module(["bertjax", *command.split(), "--help"])  # fails on a non-zero exit
  for flag in FLAGS[command]:
    assert re.search(rf"--(\[no\])?{flag}\b", shown), (command, flag, shown)
  # absl's listing: every `--flag:` line says what the flag does.
  for line in re.findall(r"^\s+--\S+?:.*$", shown, re.M):
    assert len(line.split(":", 1)[1].strip()) > 3, (command, line)


def test_bertjax_help_lists_the_commands_and_an_unknown_one_is_named():
  run = lambda *args: subprocess.run([sys.executable, "-m", "bertjax", *args],
                                     capture_output=True, text=True, cwd=paths.REPO_ROOT)
  shown = run("--help")
  assert shown.returncode == 0 and all(name in shown.stdout for name in dispatcher.COMMANDS)
  wrong = run("pretrain")
  assert wrong.returncode == 1 and "no command 'pretrain'" in wrong.stderr
  assert "train, finetune" in wrong.stderr


def test_a_command_prints_its_result_and_nothing_from_the_libraries(tmp_path):
  """`bertjax convert`: TensorFlow's and JAX's start-up lines, Orbax's logs: none of it;
  one line says what was written. `--verbosity` would bring the libraries' lines back."""
  hf_dir = sbert_helpers.write_tiny_bert(tmp_path / "hf")
  done = subprocess.run([sys.executable, "-m", "bertjax", "convert", f"--from_hf={hf_dir}",
                         f"--output_dir={tmp_path / 'ckpt'}"],
                        capture_output=True, text=True, cwd=paths.REPO_ROOT)
  assert done.returncode == 0, done.stderr
  assert done.stderr == "", done.stderr
  assert done.stdout.splitlines() == [f"Converted {hf_dir} (BertModel) -> {tmp_path / 'ckpt'}"]
