"""Vocabularies the trainer's input pipeline can be given from gin."""
import gin
import pytest
import transformers

from bertjax import main, paths
from bertjax.data import hf_vocabulary

ROBERTA_TOKENIZER = paths.data_dir() / "tokenizers" / "hf" / "roberta-gpt2-ids"


@pytest.fixture(autouse=True)
def _clear_gin():
  gin.clear_config()
  yield
  gin.clear_config()


def test_hf_vocabulary_by_name_is_robertas_byte_level_bpe():
  if not ROBERTA_TOKENIZER.is_dir():
    pytest.skip("shared data folder absent")
  vocab = hf_vocabulary.hf_vocabulary("roberta-gpt2-ids")
  reference = transformers.AutoTokenizer.from_pretrained(str(ROBERTA_TOKENIZER))
  text = "RoBERTa drops NSP and masks dynamically."
  assert list(vocab.encode(text)) == reference.encode(text, add_special_tokens=False)
  assert vocab.mask_id == reference.mask_token_id and vocab.pad_id == reference.pad_token_id


def test_roberta_pretraining_gin_uses_the_bpe_vocabulary():
  if not ROBERTA_TOKENIZER.is_dir():
    pytest.skip("shared data folder absent")
  main.parse_gin(["models/roberta_base.gin", "objectives/roberta_mlm.gin",
                  "runs/roberta_pretrain.gin"], [])
  assert gin.query_parameter("hf_vocabulary.name_or_path") == "roberta-gpt2-ids"
  vocabulary = gin.query_parameter("task_dataset.vocabulary").scoped_configurable_fn()
  assert vocabulary.vocab_size <= 50265  # roberta_base's embedding rows


def test_unknown_tokenizer_name_says_what_to_bind(tmp_path):
  with pytest.raises(FileNotFoundError, match="hf_vocabulary.name_or_path"):
    hf_vocabulary.hf_vocabulary(str(tmp_path / "no-such-tokenizer"))
