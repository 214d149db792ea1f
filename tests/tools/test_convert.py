"""`python -m bertjax.convert` both ways, as a command."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest
import torch
import transformers

import bertjax
from bertjax.checkpoints import converted as checkpoint
from bertjax.tools import convert
from tests.helpers import hf as hf_helpers, run_dirs
from tests.models.test_bert import ODD_CONFIG


def test_convert_command_round_trip(tmp_path):
  reference = hf_helpers.redraw_weights(transformers.BertForMaskedLM(transformers.BertConfig(**ODD_CONFIG)))
  reference.save_pretrained(tmp_path / "hf")
  (tmp_path / "hf" / "vocab.txt").write_text("[PAD]\n[UNK]\nhello\n")
  run = lambda *args: subprocess.run([sys.executable, "-m", "bertjax.convert", *args], check=True,
                                     capture_output=True, text=True)
  run(f"--from_hf={tmp_path / 'hf'}", f"--out={tmp_path / 'ckpt'}")
  assert (tmp_path / "ckpt" / "vocab.txt").read_text() == "[PAD]\n[UNK]\nhello\n"

  loaded = checkpoint.load(tmp_path / "ckpt")
  inputs = hf_helpers.padded_batch(ODD_CONFIG["vocab_size"])
  direct = bertjax.from_hf(tmp_path / "hf")(**inputs)["logits"]
  np.testing.assert_array_equal(loaded(**inputs)["logits"], direct)

  run(f"--to_hf={tmp_path / 'back'}", f"--checkpoint={tmp_path / 'ckpt'}")
  back = transformers.BertForMaskedLM.from_pretrained(tmp_path / "back").eval()
  with torch.no_grad():
    logits = back(**{k: torch.as_tensor(v) for k, v in inputs.items()}).logits.numpy()
  assert np.abs(logits - direct).max() <= 1e-4


def test_exports_are_world_readable_and_carry_only_the_files_their_class_needs(tmp_path):
  """A sentence model's files (modules.json, 1_Pooling/) travel with a bare encoder only,
  not with a task class's export; every file is written as open() would (0666 - umask)."""
  readable = 0o666 & ~_umask()
  for architecture in ("BertForSequenceClassification", "BertModel"):
    source, out = tmp_path / architecture, tmp_path / f"{architecture}_export"
    getattr(transformers, architecture)(transformers.BertConfig(**ODD_CONFIG)).save_pretrained(
        source)
    (source / "vocab.txt").write_text("[PAD]\n[UNK]\nhello\n")
    (source / "modules.json").write_text(json.dumps([{
        "idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"}]))
    (source / "1_Pooling").mkdir()
    (source / "1_Pooling" / "config.json").write_text('{"pooling_mode_mean_tokens": true}')
    convert.from_hf(str(source), str(tmp_path / f"{architecture}_ckpt"))
    convert.to_hf(str(tmp_path / f"{architecture}_ckpt"), str(out))
    names = {p.name for p in out.iterdir()}
    assert {"config.json", "model.safetensors", "vocab.txt"} <= names, names
    sentence_files = {"modules.json", "1_Pooling"} & names
    assert sentence_files == (set() if "For" in architecture else {"modules.json", "1_Pooling"})
    for path in out.rglob("*"):
      if path.is_file():
        assert path.stat().st_mode & 0o777 == readable, (path, oct(path.stat().st_mode))


def _umask() -> int:
  mask = os.umask(0)
  os.umask(mask)
  return mask


def test_convert_without_arguments_explains_usage():
  result = subprocess.run([sys.executable, "-m", "bertjax.convert"], capture_output=True, text=True)
  assert result.returncode != 0
  assert "--from_hf=DIR --out=DIR" in result.stderr


def test_to_hf_exports_a_bertjax_main_run(tmp_path):
  """A pretraining run's model_dir exports like a converted checkpoint (its latest step)."""
  run_dirs.fake_run(tmp_path / "run", "bert_tiny", steps=(2, 5))
  exported = convert.to_hf(str(tmp_path / "run"), str(tmp_path / "hf"))
  assert exported.description.startswith("bert BertForPreTraining (step 5)")
  back = transformers.BertForPreTraining.from_pretrained(tmp_path / "hf").eval()
  inputs = hf_helpers.padded_batch(40)
  theirs = hf_helpers.torch_outputs(back, inputs)
  diffs = hf_helpers.max_abs_diff(exported(**inputs), theirs,
                                  ["prediction_logits", "seq_relationship_logits"])
  assert max(diffs.values()) <= 1e-4, diffs


def test_an_architecture_the_family_lacks_is_refused_with_what_it_supports():
  from bertjax.hf import registry  # pylint: disable=g-import-not-at-top
  family = registry.family_for("bert")
  with pytest.raises(ValueError, match="'SpanBertForPreTraining' is not supported .* supported"):
    family.check_architecture("SpanBertForPreTraining")


def test_a_spanbert_run_exports_as_the_released_bert_architecture(tmp_path):
  # SpanBERT was released as BERT weights: the run's encoder and MLM head, its SBO head cut.
  run_dirs.fake_run(tmp_path / "run", "spanbert_base")
  convert.to_hf(str(tmp_path / "run"), str(tmp_path / "hf"))
  config = json.loads((tmp_path / "hf" / "config.json").read_text())
  assert config["architectures"] == ["BertForMaskedLM"], config
