"""A `python -m bertjax.main` run of RoBERTa (byte-level BPE) fine-tunes with the README's
command, no --tokenizer: the run keeps its vocabulary. (ALBERT's SentencePiece and XLNet's
layout are written and read back in tests/data/test_vocabulary_files.py; an ALBERT run
fine-tunes the same way, with "albert" below.) So does a ModernBERT run, on RoBERTa's BPE."""
import json

import gin
import numpy as np
import pytest

from bertjax import paths
from bertjax.checkpoints.formats import open_model
from bertjax.data import hf_vocabulary
from bertjax.finetune import run, tokenization
from tests.helpers import finetune as ftl
from tests.helpers import pretraining

HF = paths.data_dir() / "tokenizers" / "hf"
if not HF.is_dir():
  pytest.skip(f"{HF} is absent", allow_module_level=True)

# (recipe gin files, the Hugging Face tokenizer folder the run trains with, model overrides)
FAMILIES = {
    "roberta": (("runs/pretrain.gin", "models/roberta_base.gin", "objectives/roberta_mlm.gin"),
                "roberta-gpt2-ids", ""),
    "albert": (("runs/pretrain.gin", "models/albert_base.gin", "objectives/albert_mlm_sop.gin"),
               "albert", "'embedding_size': 16, "),
    "modernbert": (("runs/pretrain.gin", "models/modernbert_base.gin",
                    "objectives/modernbert_mlm.gin"), "roberta-gpt2-ids", ""),
}
# Two families in the suite, RoBERTa and ModernBERT (its own task heads over rotary, windowed
# layers): each run pretrains, then fine-tunes GLUE and SQuAD (minutes on CPU; the other
# tasks' inputs are compared with transformers' in test_tokenizer_layouts.py).
TESTED = ("roberta", "modernbert")
TINY = "'hidden_size': 32, 'num_layers': 2, 'num_heads': 2, 'intermediate_size': 64, "


@pytest.fixture(autouse=True)
def _clean_gin():
  gin.clear_config()
  yield
  gin.clear_config()


def _pretrain(model_dir, family: str) -> None:
  gin_files, tokenizer, extra = FAMILIES[family]
  vocab_size = hf_vocabulary.vocab_from_hf(str(HF / tokenizer)).vocab_size
  pretraining.train(model_dir, gin_files, [
      "task_dataset.vocabulary = @hf_vocabulary()",
      f"hf_vocabulary.name_or_path = '{tokenizer}'",
      "build_model.config_overrides = {%s%s'max_position_embeddings': 66, 'vocab_size': %d}"
      % (TINY, extra, vocab_size)], steps=2, batch_size=8, length=32)


def _finetune(gin_file: str, checkpoint, out, *flags: str) -> dict:
  """The README's command: python -m bertjax.finetune.run --gin_file=... --checkpoint=..."""
  run.FLAGS(["run", f"--gin_file={gin_file}", f"--checkpoint={checkpoint}",
             f"--output_dir={out}", "--max_steps=2", "--batch_size=4", "--eval_batch_size=8",
             "--max_seq_length=48", "--max_train_examples=8", "--max_eval_examples=8",
             *flags])
  try:
    run.main([])
  finally:
    run.FLAGS.unparse_flags()
    gin.clear_config()
  return json.loads((out / "results.json").read_text())


@pytest.mark.slow
@pytest.mark.parametrize("family", TESTED)
def test_a_pretraining_run_fine_tunes_with_its_own_vocabulary(tmp_path, family):
  model_dir = tmp_path / "pretrain"
  _pretrain(model_dir, family)
  # The run wrote its vocabulary; fine-tuning lays inputs out as that tokenizer does.
  reference = tokenization.Tokenizer.from_path(str(HF / FAMILIES[family][1]))
  model = open_model(model_dir)
  assert model.tokenizer_dir == str(model_dir) and (model_dir / "tokenizer.json").is_file()
  ours = tokenization.for_model(model)
  assert ours.layout == reference.layout
  text = "The Normans (Norman: Nourmands) gave their name to Normandy."
  assert ours.encode_with_offsets(text) == reference.encode_with_offsets(text)

  data_dir = ftl.write_rte(tmp_path / "data", train_rows=8, dev_rows=4)
  glue = _finetune("finetune/glue_rte.gin", model_dir, tmp_path / "rte",
                   f"--data_dir={data_dir}")
  squad = _finetune("finetune/squad11.gin", model_dir, tmp_path / "squad", "--doc_stride=16",
                    "--max_query_length=16")
  for report in (glue, squad):
    assert report["encoder"].startswith(f"{family} ") and report["train_steps"] == 2
    assert np.isfinite(report["history"][-1]["loss"])
  assert glue["eval"]["dev"]["examples"] == 4
  assert squad["eval"]["held_out"]["questions"] == 8 and 0 <= squad["eval"]["held_out"]["f1"]
  answers = json.loads((tmp_path / "squad" / "predictions" / "predictions.json").read_text())
  assert len(answers) == 8
