"""CoNLL-2003 reading, first-sub-token labelling and entity scoring."""
import numpy as np
import pytest

from bertjax import paths
from bertjax.finetune import ner
from bertjax.evaluation import readers
from bertjax.finetune.tokenization import WordPiece

VOCAB = paths.data_dir() / "tokenizers" / "bert-base-uncased" / "vocab.txt"


@pytest.fixture(scope="module")
def tokenizer():
  if not VOCAB.exists():
    pytest.skip("shared data folder absent")
  return WordPiece.from_path(str(VOCAB))


def test_real_files_have_the_official_sentence_counts():
  if not (paths.data_dir() / "conll2003").exists():
    pytest.skip("shared data folder absent")
  log = readers.SkipLog()
  counts = {split: len(ner.read_sentences(ner.path(split), log)) for split in ner.SPLITS}
  assert counts == {"train": 14041, "dev": 3250, "test": 3453} and not len(log)


def test_bad_lines_skip_their_sentence_with_file_and_line(tmp_path):
  path = tmp_path / "train.txt"
  path.write_text("-DOCSTART- -X- -X- O\n\nEU NNP B-NP B-ORG\nrejects VBZ B-VP O\n\n"
                  "Peter NNP B-NP B-PER\nBlackburn NNP I-NP\n\n"
                  "BRUSSELS NNP B-NP B-FOO\n\nJapan NNP B-NP B-LOC\n")
  log = readers.SkipLog()
  sentences = ner.read_sentences(str(path), log)
  assert [s.words for s in sentences] == [("EU", "rejects"), ("Japan",)]
  assert sentences[1].source == f"{path}:11"
  assert [(e.line, e.path) for e in log.entries] == [(7, str(path)), (9, str(path))]
  assert "found 3" in log.entries[0].reason and "'B-FOO' not in the label set" in log.entries[1].reason


def test_first_piece_labelling_truncation_and_decoding(tokenizer):
  sentence = ner.Sentence(("Kournikova", "beat", "Somerset", "today"),
                          ("B-PER", "O", "B-ORG", "O"), "x:1")
  pieces = tokenizer.encode_words(sentence.words)
  assert len(pieces[0]) > 1  # a multi-piece word
  # Room for [CLS], the 4 pieces of word 0, "beat" and [SEP]: the last two words are cut.
  arrays = ner.convert_sentences([sentence], tokenizer, max_seq_length=len(pieces[0]) + 3)
  first = arrays["first_piece"][0]
  assert first.tolist() == [1, 1 + len(pieces[0]), -1, -1]
  # Only first pieces carry labels; the words that do not fit get no position.
  assert arrays["label_weights"][0].sum() == (first >= 0).sum()
  assert arrays["labels"][0, first[0]] == ner.LABELS.index("B-PER")
  logits = np.zeros((1, arrays["input_ids"].shape[1], len(ner.LABELS)))
  logits[0, first[0], ner.LABELS.index("B-PER")] = 1.0
  tags = ner.word_tags(logits, arrays["first_piece"], [sentence])
  assert tags[0][0] == "B-PER" and tags[0][-1] == "O"
  scores = ner.evaluate(logits, arrays, [sentence])
  assert scores["words_without_prediction"] == int((first < 0).sum())
  assert scores["precision"] == 1.0 and scores["recall"] == pytest.approx(0.5)


def test_gold_logits_on_real_dev_give_f1_one(tokenizer):
  if not (paths.data_dir() / "conll2003").exists():
    pytest.skip("shared data folder absent")
  sentences = ner.read_sentences(ner.path("dev"), readers.SkipLog())[:300]
  arrays = ner.convert_sentences(sentences, tokenizer, max_seq_length=128)
  logits = np.eye(len(ner.LABELS))[arrays["labels"]]
  scores = ner.evaluate(logits, arrays, sentences)
  assert scores["words_without_prediction"] == 0 and scores["f1"] == 1.0
