"""Fault injection: bad inputs and files stop with an error naming them; nothing is
written and nothing comes out silently wrong (NaN embeddings, a copied /etc/passwd).

Each test builds the fault (an over-long input, a symbolic link leading out of a model
folder, a checkpoint whose metadata disagrees with its weights, a truncated weights file,
a binary vocabulary, a TSV whose every row is bad, an empty training source) and checks
the message and what is (not) on disk.
"""
import json
import os
import pathlib
import shutil
import subprocess
import sys

import jax
import numpy as np
import pytest
import transformers

import bertjax
from bertjax.checkpoints import converted
from bertjax.checkpoints.formats import open_model
from bertjax.data import hf_vocabulary, sources
from bertjax.evaluation import glue, readers
from bertjax.finetune import fitting, loop, run as finetune_run
from bertjax.hf import io as hf_io
from bertjax.models.bart import BartConfig, BartModel
from bertjax.models.common.config import max_positions
from bertjax.models.deberta import DebertaConfig, DebertaModel
from bertjax.models.t5 import T5Config
from bertjax.models.xlnet import XLNetConfig
from bertjax.sbert import encode
from bertjax.tools import convert
from tests.helpers import finetune as ft_helpers, trainer as trainer_helpers
from tests.helpers.sbert import write_tiny_bert

REPO = pathlib.Path(__file__).resolve().parents[2]
POSITIONS = 64  # the tiny BERT's position table
SECRET = "root:x:0:0:root:/root:/bin/bash\n"  # what a link out of the folder would leak


@pytest.fixture(scope="module")
def bert_dir(tmp_path_factory) -> pathlib.Path:
  """A tiny Hugging Face BERT folder (64 positions) with its vocab.txt."""
  return write_tiny_bert(tmp_path_factory.mktemp("bert") / "hf")


def _copy(folder: pathlib.Path, to: pathlib.Path) -> pathlib.Path:
  shutil.copytree(folder, to)
  return to


def _secret(tmp_path) -> pathlib.Path:
  outside = tmp_path / "outside"
  outside.mkdir(exist_ok=True)
  (outside / "passwd").write_text(SECRET)
  return outside / "passwd"


def _cli(module: str, *args, cwd=REPO) -> subprocess.CompletedProcess:
  env = dict(os.environ, PYTHONPATH=str(REPO), JAX_PLATFORMS="cpu")
  env.pop("XLA_FLAGS", None)  # one device is enough
  return subprocess.run([sys.executable, "-m", module, *map(str, args)], capture_output=True,
                        text=True, env=env, cwd=cwd, timeout=300)


# ------------------------------------------------------------------ over-long inputs
def test_api_refuses_inputs_past_the_position_table(bert_dir):
  model = bertjax.from_hf(bert_dir)
  fits = model(input_ids=np.ones((1, POSITIONS), np.int32))
  assert all(np.isfinite(v).all() for v in fits.values())
  for call, match in (
      (lambda: model(input_ids=np.ones((1, POSITIONS + 1), np.int32)),
       r"input_ids \(for BertModel\): rows of 65 tokens, but the model has 64 positions"),
      (lambda: open_model(bert_dir)(input_ids=np.ones((2, 600), np.int32)),
       r"rows of 600 tokens, .* 64 positions .*Truncate inputs to at most 64"),
      (lambda: model(input_ids=np.ones((1, 8), np.int32), position_ids=np.arange(60, 68)[None]),
       r"position_ids go up to 67, but BertModel has 64 positions"),
      # The module itself, without the API: refused while tracing (the shape is static).
      (lambda: model.module.apply({"params": model.params}, np.ones((1, 65), np.int32)),
       r"input_ids: rows of 65 tokens, but the model has 64 positions")):
    with pytest.raises(ValueError, match=match):
      call()
  # Packed rows longer than the table are fine while every position stays inside it.
  packed = model(input_ids=np.ones((1, 100), np.int32), position_ids=np.arange(100)[None] % 50)
  assert np.isfinite(packed["last_hidden_state"]).all()


def test_offset_tables_and_relative_positions(tmp_path):
  """RoBERTa loses padding_idx + 1 rows to its offset; relative-only models have no
  table to run past and take any length."""
  tiny = dict(hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32,
              vocab_size=40)
  transformers.RobertaModel(transformers.RobertaConfig(
      **tiny, max_position_embeddings=20, type_vocab_size=1)).save_pretrained(tmp_path / "r")
  roberta = bertjax.from_hf(tmp_path / "r")
  assert np.isfinite(roberta(input_ids=np.full((1, 18), 5))["last_hidden_state"]).all()
  for call in (lambda: roberta(input_ids=np.full((1, 19), 5)),
               lambda: roberta.module.apply({"params": roberta.params}, np.full((1, 19), 5))):
    with pytest.raises(ValueError, match="rows of 19 tokens, but the model has 18 positions"):
      call()
  transformers.DebertaV2Model(transformers.DebertaV2Config(
      **tiny, max_position_embeddings=20, relative_attention=True, position_buckets=8,
      position_biased_input=False)).save_pretrained(tmp_path / "d")
  deberta = bertjax.from_hf(tmp_path / "d")(input_ids=np.full((1, 50), 5))
  assert np.isfinite(deberta["last_hidden_state"]).all()
  bart = BartModel(BartConfig(vocab_size=40, hidden_size=16, encoder_layers=1, decoder_layers=1,
                              encoder_heads=2, decoder_heads=2, encoder_ffn_size=32,
                              decoder_ffn_size=32, max_position_embeddings=20))
  for encoder_length, decoder_length in ((21, 4), (4, 21)):
    with pytest.raises(ValueError, match="input_ids: rows of 21 tokens, but the model has 20"):
      bart.init(jax.random.PRNGKey(0), np.ones((1, encoder_length), np.int32),
                np.ones((1, decoder_length), np.int32))
  absolute = DebertaModel(DebertaConfig(vocab_size=40, hidden_size=16, num_layers=1, num_heads=2,
                                        intermediate_size=32, max_position_embeddings=20,
                                        position_biased_input=True, position_buckets=8))
  with pytest.raises(ValueError, match="input_ids: rows of 21 tokens, but the model has 20"):
    absolute.init(jax.random.PRNGKey(0), np.ones((1, 21), np.int32))
  assert max_positions(T5Config()) is None and max_positions(XLNetConfig()) is None
  assert max_positions(DebertaConfig(position_biased_input=True)) == 512


def test_generation_past_the_position_table_is_refused(tmp_path):
  transformers.GPT2LMHeadModel(transformers.GPT2Config(
      n_embd=16, n_layer=1, n_head=2, vocab_size=30, n_positions=12)).save_pretrained(tmp_path)
  gpt = bertjax.from_hf(tmp_path)
  with pytest.raises(ValueError, match="input_ids: rows of 13 tokens, but the model has 12"):
    gpt.module.apply({"params": gpt.params}, np.ones((1, 13), np.int32))
  with pytest.raises(ValueError, match=r"prompt \+ max_new_tokens\): rows of 14 tokens, but "
                                       r"the model has 12 .*at most 8 new tokens"):
    gpt.generate(np.ones((1, 4), np.int32), max_new_tokens=10)
  assert gpt.generate(np.ones((1, 4), np.int32), max_new_tokens=8).shape[1] <= 12


def test_encode_refuses_max_seq_length_past_the_table(bert_dir, tmp_path):
  (tmp_path / "in.txt").write_text("a man is playing the guitar\n" * 3)
  result = _cli("bertjax.encode", f"--checkpoint={bert_dir}", f"--input={tmp_path / 'in.txt'}",
                f"--output={tmp_path / 'out.npy'}", "--max_seq_length=1024", "--noprogress")
  assert result.returncode != 0
  assert "--max_seq_length" in result.stderr and "64 positions" in result.stderr
  assert "Traceback" not in result.stderr and not (tmp_path / "out.npy").exists()
  # Without --max_seq_length the default is cut to the table: long sentences are
  # truncated to 64 tokens, and their short neighbours in packed rows stay exact.
  encoder = encode.Encoder.from_checkpoint(str(bert_dir), row_length=128)
  assert encoder.max_seq_length == POSITIONS
  sentences = ["very long sentence with many words " * 30, "a dog", "a cat runs"]
  vectors = encoder.encode(sentences)
  alone = [encoder.encode([s])[0] for s in sentences[1:]]
  assert np.isfinite(vectors).all() and encoder.stats.truncated == 1
  np.testing.assert_allclose(vectors[1:], alone, atol=1e-5)


def test_finetuning_refuses_max_seq_length_past_the_table(bert_dir, tmp_path):
  data_dir = ft_helpers.write_rte(tmp_path / "data", train_rows=4, dev_rows=2)
  options = fitting.Options(max_seq_length=128, data_dir=data_dir,
                            output_dir=str(tmp_path / "out"), finetune=loop.FinetuneConfig())
  with pytest.raises(ValueError, match=r"Options.max_seq_length \(--max_seq_length\): rows of "
                                       r"128 tokens, but the model has 64 positions"):
    finetune_run.run(finetune_run.FinetuneRun(task="rte", init_checkpoint=str(bert_dir)),
                     options)
  assert not (tmp_path / "out").exists()


def test_trainer_refuses_sequence_length_past_the_table(tmp_path):
  trainer_helpers.configure("Trainer.sequence_length = 100")
  from bertjax.train import trainer
  with pytest.raises(ValueError, match=r"Trainer.sequence_length = 100 \(input_ids\): rows of "
                                       r"100 tokens, but the model has 64 positions"):
    trainer.Trainer(model_dir=str(tmp_path / "run")).run("train")
  assert not list((tmp_path / "run").glob("checkpoints/*"))


# ------------------------------------------------------------------ symbolic links
def test_convert_refuses_a_vocabulary_linking_out_of_the_folder(bert_dir, tmp_path):
  model_dir = _copy(bert_dir, tmp_path / "hf")
  (model_dir / "vocab.txt").unlink()
  (model_dir / "vocab.txt").symlink_to(_secret(tmp_path))
  with pytest.raises(ValueError, match=rf"{model_dir / 'vocab.txt'} is a symbolic link to "
                                       rf"{tmp_path / 'outside' / 'passwd'}, which leads out of "
                                       rf"the model folder"):
    convert.from_hf(str(model_dir), str(tmp_path / "ckpt"))
  assert not (tmp_path / "ckpt").exists()
  # The tokenizer readers refuse it too, before reading a byte of it.
  for read in (lambda: encode.Encoder.from_checkpoint(str(model_dir)),
               lambda: hf_vocabulary.vocab_from_hf(model_dir)):
    with pytest.raises(ValueError, match="vocab.txt is a symbolic link to"):
      read()
  options = fitting.Options(max_seq_length=16, output_dir=str(tmp_path / "out"),
                            finetune=loop.FinetuneConfig())
  with pytest.raises(ValueError, match="vocab.txt is a symbolic link to"):
    finetune_run.run(finetune_run.FinetuneRun(task="rte", init_checkpoint=str(model_dir)),
                     options)
  assert not (tmp_path / "out").exists()


def test_linked_directories_and_weights_out_of_the_folder_are_refused(bert_dir, tmp_path):
  secret = _secret(tmp_path)
  model_dir = _copy(bert_dir, tmp_path / "hf")
  (model_dir / "2_Normalize").symlink_to(secret.parent, target_is_directory=True)
  with pytest.raises(ValueError, match="2_Normalize is a symbolic link to .*outside"):
    convert.from_hf(str(model_dir), str(tmp_path / "ckpt"))
  assert not (tmp_path / "ckpt").exists()
  (model_dir / "2_Normalize").unlink()
  os.replace(model_dir / "model.safetensors", tmp_path / "outside" / "weights")
  (model_dir / "model.safetensors").symlink_to(tmp_path / "outside" / "weights")
  with pytest.raises(ValueError, match="model.safetensors is a symbolic link to"):
    bertjax.from_hf(model_dir)
  # A sentence-transformers modules.json may not point the model out of its folder.
  sentence_dir = tmp_path / "sentence"
  sentence_dir.mkdir()
  (sentence_dir / "modules.json").write_text(json.dumps(
      [{"path": "../hf", "type": "sentence_transformers.models.Transformer"}]))
  with pytest.raises(ValueError, match=r"sentence.\.\./hf resolves, which leads out of"):
    open_model(sentence_dir)


def test_a_link_inside_the_folder_is_followed(bert_dir, tmp_path):
  model_dir = _copy(bert_dir, tmp_path / "hf")
  os.replace(model_dir / "vocab.txt", model_dir / "words.txt")
  (model_dir / "vocab.txt").symlink_to("words.txt")
  convert.from_hf(str(model_dir), str(tmp_path / "ckpt"))
  assert (tmp_path / "ckpt" / "vocab.txt").read_text() == (model_dir / "words.txt").read_text()
  assert not (tmp_path / "ckpt" / "vocab.txt").is_symlink()


# ------------------------------------------------------------------ metadata vs weights
def test_to_hf_refuses_metadata_that_disagrees_with_the_weights(bert_dir, tmp_path):
  ckpt = tmp_path / "ckpt"
  convert.from_hf(str(bert_dir), str(ckpt))
  model_record = json.loads((ckpt / "model.json").read_text())
  model_record["config"]["fields"]["intermediate_size"] = 48  # the weights are 64 wide
  (ckpt / "model.json").write_text(json.dumps(model_record))
  result = _cli("bertjax.convert", f"--to_hf={tmp_path / 'export'}", f"--checkpoint={ckpt}")
  assert result.returncode != 0 and "Traceback" not in result.stderr
  assert (f"{ckpt}: its weights disagree with its config (BertModel" in result.stderr
          and "tensor 'encoder/layers/mlp/intermediate/bias' has shape (2, 64) in the weights, "
          "but the config implies shape (2, 48)" in result.stderr), result.stderr
  assert not (tmp_path / "export").exists()


# ------------------------------------------------------------------ unreadable files
def test_truncated_or_corrupt_weights_are_named(bert_dir, tmp_path):
  model_dir = _copy(bert_dir, tmp_path / "hf")
  weights = model_dir / "model.safetensors"
  weights.write_bytes(weights.read_bytes()[:weights.stat().st_size // 2])
  with pytest.raises(ValueError, match=rf"{weights} \(\d+ bytes\) is not a readable safetensors "
                                       r"weights file .*truncated or corrupt"):
    bertjax.from_hf(model_dir)
  weights.unlink()
  (model_dir / hf_io.TORCH_FILE).write_bytes(b"\x80\x02garbage")
  with pytest.raises(ValueError, match=rf"{model_dir / hf_io.TORCH_FILE} .*not a readable "
                                       r"PyTorch \(.bin\) weights file"):
    bertjax.from_hf(model_dir)


def test_binary_vocabulary_is_named(bert_dir, tmp_path):
  model_dir = _copy(bert_dir, tmp_path / "hf")
  (model_dir / "vocab.txt").write_bytes(bytes(range(256)) * 4)
  vocab = model_dir / "vocab.txt"
  options = fitting.Options(max_seq_length=16, output_dir=str(tmp_path / "out"),
                            finetune=loop.FinetuneConfig())
  for read in (lambda: hf_vocabulary.vocab_from_hf(model_dir),
               lambda: encode.Encoder.from_checkpoint(str(model_dir)),
               lambda: convert.from_hf(str(model_dir), str(tmp_path / "ckpt")),
               lambda: finetune_run.run(finetune_run.FinetuneRun(
                   task="rte", init_checkpoint=str(model_dir)), options)):
    with pytest.raises(ValueError, match=rf"{vocab} is not a text file: a NUL byte at byte 0"):
      read()
  assert not (tmp_path / "ckpt").exists() and not (tmp_path / "out").exists()
  vocab.write_bytes("[PAD]\n[UNK]\ncaf\xe9\n".encode("latin-1"))
  with pytest.raises(ValueError, match=rf"{vocab} is not a text file: invalid UTF-8 at byte 15"):
    hf_vocabulary.vocab_from_hf(model_dir)


@pytest.mark.parametrize("content, match", [
    (b"{not json", "is not valid JSON"),
    (b"\xff\xfe\x00binary", "is not UTF-8 text"),
    (b"[1, 2]", "holds a JSON list; expected"),
    (b'{"family": "bert", "architecture": "BertModel", "hf_config": "x"}',
     "has a str as 'hf_config' \\(expected a dict\\)"),
])
def test_invalid_metadata_json_is_named(bert_dir, tmp_path, content, match):
  ckpt = tmp_path / "ckpt"
  converted.save(bertjax.from_hf(bert_dir), ckpt)
  (ckpt / "model.json").unlink()  # a checkpoint converted before the model record
  (ckpt / "metadata.json").write_bytes(content)
  with pytest.raises(ValueError, match=rf"{ckpt / 'metadata.json'} {match}"):
    open_model(ckpt)


@pytest.mark.parametrize("content, match", [
    (b"{not json", "is not valid JSON"),
    (b"\xff\xfe\x00binary", "is not UTF-8 text"),
    (b"[1, 2]", "holds a JSON list; expected"),
    (b'{"version": 1, "family": "bert"}', r"has no \['architecture', 'config', 'weights'\]"),
])
def test_invalid_model_record_is_named(bert_dir, tmp_path, content, match):
  ckpt = tmp_path / "ckpt"
  converted.save(bertjax.from_hf(bert_dir), ckpt)
  (ckpt / "model.json").write_bytes(content)
  with pytest.raises(ValueError, match=rf"{ckpt / 'model.json'} {match}"):
    open_model(ckpt)


def test_invalid_config_json_is_named(bert_dir, tmp_path):
  model_dir = _copy(bert_dir, tmp_path / "hf")
  (model_dir / "config.json").write_bytes(b"\x00\x01\x02\xff")
  with pytest.raises(ValueError, match=rf"{model_dir / 'config.json'} is not UTF-8 text"):
    bertjax.from_hf(model_dir)
  (model_dir / "config.json").write_text('["model_type", "bert"]')
  with pytest.raises(ValueError, match=rf"{model_dir / 'config.json'} holds a JSON list"):
    open_model(model_dir)


def test_tsv_whose_rows_are_all_rejected_is_an_error(bert_dir, tmp_path):
  data_dir = ft_helpers.write_rte(tmp_path / "data", train_rows=4, dev_rows=2)
  train = pathlib.Path(data_dir) / "glue" / "RTE" / "train.tsv"
  lines = train.read_text().splitlines()
  train.write_text("\n".join([lines[0]] + [l.replace("\t", " ") for l in lines[1:]]) + "\n")
  message = (rf"{train}: all 4 data rows were rejected \(4 x expected 4 tab-separated fields, "
             r"found 1\); first: line 2:")
  options = fitting.Options(max_seq_length=16, data_dir=data_dir,
                            output_dir=str(tmp_path / "out"), finetune=loop.FinetuneConfig())
  with pytest.raises(ValueError, match=message):  # was a ZeroDivisionError
    finetune_run.run(finetune_run.FinetuneRun(task="rte", init_checkpoint=str(bert_dir)),
                     options)
  assert os.listdir(tmp_path / "out") == ["config.gin"]  # the config it ran with, only
  task = glue.get_task("rte")
  train.write_text("\n".join([lines[0]] + [l.rsplit("\t", 1)[0] + "\tmaybe" for l in lines[1:]]))
  with pytest.raises(ValueError, match=r"all 4 data rows were rejected \(4 x label\); first: "
                                       r"line 2: label 'maybe' not in rte's label set"):
    glue.read_examples(task, "train", readers.SkipLog(), data_dir)


def test_empty_training_source_names_source_and_split(tmp_path):
  (tmp_path / "blank.txt").write_text("\n   \n\t\n")
  source = sources.TextFileSource({"train": str(tmp_path / "*.txt")})
  from bertjax.data import recipes
  vocab = hf_vocabulary.hf_vocabulary("bert-base-uncased")
  with pytest.raises(ValueError, match=r"TextFileSource\(text\): split 'train' has no documents "
                                       r"after filtering \(3 empty documents\) in \[.*blank.txt"):
    recipes.get_dataset("bert_mlm_nsp", "train", 32, batch_size=2, vocabulary=vocab,
                        source=source)
  # Any other data that yields nothing stops the trainer by name before compute.
  trainer_helpers.configure("SyntheticMlmNsp.num_batches = 0")
  from bertjax.train import trainer
  with pytest.raises(ValueError, match="Task 'synthetic' gave no training batch: the source of "
                                       "its 'train' split has no documents"):
    trainer.Trainer(model_dir=str(tmp_path / "run")).run("train")
  assert not list((tmp_path / "run").glob("checkpoints/*"))


# ------------------------------------------------------------------ command lines
def test_finetune_cli_reports_bad_input_in_one_line(bert_dir, tmp_path):
  data_dir = ft_helpers.write_rte(tmp_path / "data", train_rows=4, dev_rows=2)
  finetune_run.FLAGS(["run", "--task=rte", f"--checkpoint={bert_dir}", f"--data_dir={data_dir}",
                      f"--output_dir={tmp_path / 'out'}", "--max_seq_length=128"])
  try:
    with pytest.raises(SystemExit) as stopped:
      finetune_run.cli_main([])
  finally:
    finetune_run.FLAGS.unparse_flags()
  message = str(stopped.value.code)
  assert message.startswith("python -m bertjax.finetune.run: Options.max_seq_length "
                            "(--max_seq_length): rows of 128 tokens"), message
  assert "\n" not in message and not (tmp_path / "out").exists()
