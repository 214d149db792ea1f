"""A pretraining vocabulary written as tokenizer files (what a run leaves in its model_dir)
reads back, in transformers' AutoTokenizer and in fine-tuning, as the tokenizer it came from."""
import pytest
import transformers

from bertjax import paths
from bertjax.data import hf_vocabulary, vocabulary_files
from bertjax.finetune import tokenization
from tests.helpers import finetune as ftl

HF = paths.data_dir() / "tokenizers" / "hf"
if not HF.is_dir():
  pytest.skip(f"{HF} is absent", allow_module_level=True)

# folder -> the recipe layout its family pretrains with
FOLDERS = {
    "bert-base-uncased": lambda: (str(HF / "bert-base-uncased"), "bert"),
    "albert": lambda: (str(HF / "albert"), "bert"),
    "bigbird": lambda: (str(HF / "bigbird"), "bert"),
    "roberta-gpt2-ids": lambda: (str(HF / "roberta-gpt2-ids"), "bert"),
    "xlnet": lambda: (ftl.sentencepiece_folder("xlnet"), "xlnet"),
}
TEXTS = [("Hello  world, it's ``quoted'' Ünïcödé 漢字 🚀 here.", " And\ta second\n one  "),
         ("The Normans gave their name to Normandy.", "Who were the Normans?")]


@pytest.mark.parametrize("name", sorted(FOLDERS))
def test_saved_vocabulary_reads_back_as_its_reference(tmp_path, name):
  folder, layout = FOLDERS[name]()
  written = vocabulary_files.save(hf_vocabulary.vocab_from_hf(folder), str(tmp_path), layout)
  assert {"tokenizer.json", "tokenizer_config.json"} <= set(written)
  assert all((tmp_path / f).is_file() for f in written)
  reference = transformers.AutoTokenizer.from_pretrained(folder)
  reloaded = transformers.AutoTokenizer.from_pretrained(str(tmp_path))
  first, second = zip(*TEXTS)
  for texts in ((list(first),), (list(first), list(second))):
    expected = reference(*texts, padding=True, return_token_type_ids=True)
    assert reloaded(*texts, padding=True, return_token_type_ids=True).data == expected.data
  ours, theirs = (tokenization.Tokenizer.from_path(f) for f in (str(tmp_path), folder))
  assert ours.layout == theirs.layout and ours.pad_id == theirs.pad_id
  assert ours.encode_with_offsets(TEXTS[0][0]) == theirs.encode_with_offsets(TEXTS[0][0])


def test_a_vocabulary_with_sentinels_is_not_written(tmp_path):
  vocabulary = hf_vocabulary.vocab_from_hf(str(HF / "albert"), extra_ids=3)
  with pytest.raises(ValueError, match=r"3 extra ids \(T5's sentinels\)"):
    vocabulary_files.save(vocabulary, str(tmp_path))
  assert not list(tmp_path.iterdir())
