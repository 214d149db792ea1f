"""Tokenizers that cannot feed a model fail before any training, naming the file and the fix."""
import json
import shutil

import gin
import pytest
import transformers

from bertjax import paths
from bertjax.checkpoints import encoders
from bertjax.checkpoints.formats import open_model
from bertjax.finetune import fitting, loop, run, tokenization
from tests.helpers import finetune as ftl

HF = paths.data_dir() / "tokenizers" / "hf"


@pytest.fixture(autouse=True)
def _clean_gin():
  gin.clear_config()
  yield
  gin.clear_config()


def test_a_vocabulary_without_the_layouts_special_token_is_named(tmp_path):
  folder = tmp_path / "no_cls"
  folder.mkdir()
  (folder / "vocab.txt").write_text("\n".join(w for w in ftl.WORDS if w != "[CLS]") + "\n")
  with pytest.raises(ValueError, match=r"no_cls/vocab.txt has no cls token '\[CLS\]', which "
                                       r"its inputs `\[CLS\] A \[SEP\] B \[SEP\]` need: add "
                                       r"it.*cls_token in tokenizer_config.json"):
    tokenization.Tokenizer.from_path(str(folder))
  # Naming the vocabulary's own classifier token is the fix the message gives.
  (folder / "tokenizer_config.json").write_text(json.dumps({"cls_token": "[MASK]"}))
  assert tokenization.Tokenizer.from_path(str(folder)).layout.pair[0] == (3, 0)  # [MASK]


def test_a_sentencepiece_model_without_xlnets_tokens_is_named(tmp_path):
  folder = tmp_path / "xlnet"
  shutil.copytree(ftl.sentencepiece_folder("deberta_v3"), folder)  # [CLS]/[SEP], no <cls>
  (folder / "spm.model").rename(folder / "spiece.model")
  (folder / "tokenizer_config.json").write_text(json.dumps({"tokenizer_class": "XLNetTokenizer"}))
  with pytest.raises(ValueError, match=r"xlnet/spiece.model has no cls token '<cls>', which "
                                       r"its inputs `A <sep> B <sep> <cls>` need"):
    tokenization.Tokenizer.from_path(str(folder))
  (folder / "tokenizer_config.json").write_text(json.dumps({"tokenizer_class": "T5Tokenizer"}))
  with pytest.raises(ValueError, match=r"tokenizer_class 'T5Tokenizer'.*set tokenizer_class "
                                       r"to one of \['AlbertTokenizer'"):
    tokenization.Tokenizer.from_path(str(folder))


def test_a_decoders_tokenizer_is_refused():
  if not HF.is_dir():
    pytest.skip(f"{HF} is absent")
  with pytest.raises(ValueError, match=r"gpt2/tokenizer.json has no padding token.*pad_token"):
    tokenization.Tokenizer.from_path(str(HF / "gpt2"))


def _tiny_bert(directory) -> str:
  config = transformers.BertConfig(vocab_size=len(ftl.WORDS), hidden_size=16,
                                   num_hidden_layers=1, num_attention_heads=2,
                                   intermediate_size=32, max_position_embeddings=32)
  transformers.BertModel(config).save_pretrained(directory)
  ftl.write_vocab(directory)
  return str(directory)


def test_a_tokenizer_larger_than_the_embedding_table_stops_the_run(tmp_path):
  if not HF.is_dir():
    pytest.skip(f"{HF} is absent")
  model = _tiny_bert(tmp_path / "tiny")
  data_dir = ftl.write_rte(tmp_path / "data")
  options = fitting.Options(finetune=loop.FinetuneConfig(batch_size=4), max_steps=1,
                            max_seq_length=16, data_dir=data_dir,
                            output_dir=str(tmp_path / "out"))
  with pytest.raises(ValueError, match=r"bert-base-uncased/tokenizer.json has 30522 token ids "
                                       r"but bert BertModel .* embeds only 16 .*past its "
                                       r"embedding table.*--tokenizer=FOLDER"):
    run.run(run.FinetuneRun(task="rte", init_checkpoint=model,
                            tokenizer=str(HF / "bert-base-uncased")), options)
  assert not (tmp_path / "out" / "checkpoints").exists()
  # Its own 16-word vocabulary fits.
  encoder = encoders.base_encoder(open_model(model))
  assert tokenization.for_model(encoder).vocab_size == len(ftl.WORDS)


def test_a_folder_without_tokenizer_files_asks_for_one(tmp_path):
  model = _tiny_bert(tmp_path / "tiny")
  (tmp_path / "tiny" / "vocab.txt").unlink()
  with pytest.raises(FileNotFoundError, match=r"tiny holds no tokenizer.*keeps no tokenizer "
                                              r"beside its weights.*--tokenizer=FOLDER"):
    tokenization.for_model(open_model(model))
