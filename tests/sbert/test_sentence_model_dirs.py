"""`Encoder.from_checkpoint` on the sentence-model folders `bertjax.open_model` reads:
an older sentence-transformers layout, an SBERT export of a pooler-less encoder, and a
checkpoint whose encoder sits inside a pretraining wrapper."""
import json
import shutil

import numpy as np
import torch
import transformers

from bertjax.checkpoints import encoders
from bertjax.checkpoints.formats import open_model
from bertjax.sbert import encode, io as sbert_io
from tests.helpers import sbert as sbert_helpers

SENTENCES = ["a man is playing the guitar .", "the dog runs on grass", "cat"]


def _save_tiny(model_cls, directory, seed=0):
  """A random `model_cls` BERT (32 wide, 2 layers) with the tiny vocabulary."""
  torch.manual_seed(seed)
  model = model_cls(transformers.BertConfig(
      vocab_size=len(sbert_helpers.VOCAB), hidden_size=32, num_hidden_layers=2,
      num_attention_heads=4, intermediate_size=64, max_position_embeddings=64))
  model.save_pretrained(directory)
  (directory / "vocab.txt").write_text("\n".join(sbert_helpers.VOCAB) + "\n")
  return model


def test_transformer_in_a_subfolder_uses_its_tokenizer_and_settings(tmp_path):
  inner = sbert_helpers.write_tiny_bert(tmp_path / "st" / "0_Transformer")
  (inner / "sentence_bert_config.json").write_text('{"max_seq_length": 5}')
  sbert_io.write_sentence_config(tmp_path / "st", sbert_io.SentenceConfig("cls", True), 32)
  (tmp_path / "st" / "sentence_bert_config.json").unlink()  # only the subfolder has it
  modules = json.loads((tmp_path / "st" / "modules.json").read_text())
  modules[0]["path"] = "0_Transformer"
  (tmp_path / "st" / "modules.json").write_text(json.dumps(modules))
  assert sbert_io.read_sentence_config(tmp_path / "st") == sbert_io.SentenceConfig("cls", True, 5)
  ours = encode.Encoder.from_checkpoint(tmp_path / "st")
  alone = encode.Encoder.from_checkpoint(inner, pooling="cls", normalize=True, max_seq_length=5)
  np.testing.assert_array_equal(ours.encode(SENTENCES), alone.encode(SENTENCES))
  assert ours.stats.truncated == 2


def test_sbert_export_of_a_masked_lm_encoder_encodes_as_trained(tmp_path):
  """BertForMaskedLM has no pooler: its exported bare encoder reopens without one."""
  _save_tiny(transformers.BertForMaskedLM, tmp_path / "mlm")
  base = encoders.base_encoder(open_model(tmp_path / "mlm"))
  sbert_io.save_sentence_model(tmp_path / "sbert", base, sbert_io.SentenceConfig("mean"),
                               base.tokenizer_dir, source=base.description)
  saved = json.loads((tmp_path / "sbert" / "metadata.json").read_text())
  assert saved["source"] == base.description
  exported = encode.Encoder.from_checkpoint(tmp_path / "sbert")
  direct = encode.Encoder(base.module, base.params, sbert_io.load_tokenizer(tmp_path / "mlm"))
  np.testing.assert_allclose(exported.encode(SENTENCES), direct.encode(SENTENCES), atol=1e-6)


def test_encoder_inside_a_pretraining_wrapper_is_the_one_encoded(tmp_path):
  wrapper = _save_tiny(transformers.BertForPreTraining, tmp_path / "pretraining")
  wrapper.bert.save_pretrained(tmp_path / "bare")
  shutil.copy(tmp_path / "pretraining" / "vocab.txt", tmp_path / "bare")
  wrapped = encode.Encoder.from_checkpoint(tmp_path / "pretraining")
  bare = encode.Encoder.from_checkpoint(tmp_path / "bare")
  np.testing.assert_allclose(wrapped.encode(SENTENCES), bare.encode(SENTENCES), atol=1e-6)
