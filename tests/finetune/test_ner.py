"""CoNLL-2003 first-sub-token labelling, word tags from logits and entity scoring."""
import numpy as np
import pytest

from bertjax import paths
from bertjax.evaluation import conll, readers
from bertjax.finetune import ner
from bertjax.finetune.tokenization import WordPiece

VOCAB = paths.data_dir() / "tokenizers" / "bert-base-uncased" / "vocab.txt"


@pytest.fixture(scope="module")
def tokenizer():
  if not VOCAB.exists():
    pytest.skip("shared data folder absent")
  return WordPiece.from_path(str(VOCAB))


def test_first_piece_labelling_truncation_and_decoding(tokenizer):
  sentence = conll.Sentence(("Kournikova", "beat", "Somerset", "today"),
                          ("B-PER", "O", "B-ORG", "O"), "x:1")
  pieces = tokenizer.encode_words(sentence.words)
  assert len(pieces[0]) > 1  # a multi-piece word
  # Room for [CLS], the 4 pieces of word 0, "beat" and [SEP]: the last two words are cut.
  arrays = ner.convert_sentences([sentence], tokenizer, max_seq_length=len(pieces[0]) + 3)
  first = arrays["first_piece"][0]
  assert first.tolist() == [1, 1 + len(pieces[0]), -1, -1]
  # Only first pieces carry labels; the words that do not fit get no position.
  assert arrays["label_weights"][0].sum() == (first >= 0).sum()
  assert arrays["labels"][0, first[0]] == conll.LABELS.index("B-PER")
  logits = np.zeros((1, arrays["input_ids"].shape[1], len(conll.LABELS)))
  logits[0, first[0], conll.LABELS.index("B-PER")] = 1.0
  tags = ner.word_tags(logits, arrays["first_piece"], [sentence])
  assert tags[0][0] == "B-PER" and tags[0][-1] == "O"
  scores = ner.evaluate(logits, arrays, [sentence])
  assert scores["words_without_prediction"] == int((first < 0).sum())
  assert scores["precision"] == 1.0 and scores["recall"] == pytest.approx(0.5)


def test_gold_logits_on_real_dev_give_f1_one(tokenizer):
  if not (paths.data_dir() / "conll2003").exists():
    pytest.skip("shared data folder absent")
  sentences = conll.read_sentences(conll.path("dev"), readers.SkipLog())[:300]
  arrays = ner.convert_sentences(sentences, tokenizer, max_seq_length=128)
  logits = np.eye(len(conll.LABELS))[arrays["labels"]]
  scores = ner.evaluate(logits, arrays, sentences)
  assert scores["words_without_prediction"] == 0 and scores["f1"] == 1.0
