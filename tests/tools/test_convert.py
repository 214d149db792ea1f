"""`python -m bertjax.convert` both ways, as a command."""
import subprocess
import sys

import numpy as np
import torch
import transformers

import bertjax
from bertjax.checkpoints import converted as checkpoint
from tests.helpers import hf as hf_helpers
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


def test_convert_without_arguments_explains_usage():
  result = subprocess.run([sys.executable, "-m", "bertjax.convert"], capture_output=True, text=True)
  assert result.returncode != 0
  assert "--from_hf=DIR --out=DIR" in result.stderr
