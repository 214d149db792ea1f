"""Vocabularies trained on the embedded corpus load and round-trip, and WordPiece training
gives the same vocabulary in every process."""
import json
import subprocess
import sys

import tensorflow as tf
import transformers

from bertjax.data import corpus
from bertjax.data import vocab_training
from bertjax.data import hf_vocabulary
from bertjax.data import vocabularies

SAMPLE = ["The quick brown fox returns the ceiling of self, as an integer.",
          "Return a new dictionary initialized from an optional positional argument.",
          "Naïve CAFÉ text (with accents) and 日本語.", ""]


def _sentences(n=4000):
  return corpus.sentences("train")[:n]


def test_train_wordpiece_round_trip(tmp_path):
  vocab = vocab_training.train_wordpiece(_sentences(), 2000, str(tmp_path))
  assert isinstance(vocab, vocabularies.WordPieceVocabulary)
  assert 1000 < vocab.vocab_size <= 2000
  assert (vocab.pad_id, vocab.unk_id, vocab.cls_id, vocab.sep_id, vocab.mask_id) == (0, 1, 2, 3, 4)
  reference = transformers.AutoTokenizer.from_pretrained(str(tmp_path))
  for text in SAMPLE:
    ids = list(vocab.encode(text))
    assert ids == reference.encode(text, add_special_tokens=False)
    assert vocab.encode_tf(tf.constant(text)).numpy().tolist() == ids
  text = "return a new dictionary initialized from an optional positional argument ."
  assert vocab.decode(vocab.encode(text)) == text.replace(" .", ".")
  # The same directory loads again through vocab_from_hf.
  assert hf_vocabulary.vocab_from_hf(tmp_path).encode(SAMPLE[0]) == vocab.encode(SAMPLE[0])


def test_train_wordpiece_is_the_same_in_every_process(tmp_path):
  """tokenizers' own trainer numbered the '##c' pieces in a hash map's order, which changes
  from process to process: vocab.txt came out in another order on each of three runs."""
  script = ("import sys; from bertjax.data import corpus, vocab_training; "
            "vocab_training.train_wordpiece(corpus.sentences('train')[:4000], 2000, sys.argv[1])")
  vocabs = []
  for run in ("first", "second"):
    subprocess.run([sys.executable, "-c", script, str(tmp_path / run)], check=True)
    vocabs.append((tmp_path / run / "vocab.txt").read_text())
  assert vocabs[0] == vocabs[1]
  # The numbered pieces are ordinary word pieces: only BERT's five tokens are special, and
  # a word split into '##' pieces decodes whole with special tokens skipped.
  added = json.loads((tmp_path / "first" / "tokenizer.json").read_text())["added_tokens"]
  assert [t["content"] for t in added] == list(vocab_training.BERT_SPECIAL_TOKENS)
  reference = transformers.AutoTokenizer.from_pretrained(str(tmp_path / "first"))
  pieces = reference.tokenize("unreturnables")
  assert len(pieces) > 1 and all(p.startswith("##") for p in pieces[1:])
  assert reference.decode(reference.encode("unreturnables", add_special_tokens=False),
                          skip_special_tokens=True) == "unreturnables"


def test_train_sentencepiece_round_trip(tmp_path):
  vocab = vocab_training.train_sentencepiece(_sentences(3000), 1000, str(tmp_path),
                                             lower_case=True)
  assert (vocab.pad_id, vocab.eos_id, vocab.unk_id) == (0, 1, 2)
  assert (vocab.cls_id, vocab.sep_id, vocab.mask_id) == (3, 4, 5)
  assert vocab.vocab_size == 1000
  for text in SAMPLE:
    ids = list(vocab.encode(text))
    assert ids == vocab.tokenizer.EncodeAsIds(text)
    assert vocab.encode_tf(tf.constant(text)).numpy().tolist() == ids
  text = "Return a new dictionary initialized from an optional positional argument."
  assert vocab.decode(vocab.encode(text)) == text.lower()
  assert vocab.decode(vocab.encode(text) + [vocab.eos_id, 0, 0]) == text.lower()
  loaded = hf_vocabulary.vocab_from_hf(tmp_path)
  assert loaded.encode(text) == vocab.encode(text)


def test_sentencepiece_without_added_tokens_encodes_in_graph(tmp_path):
  vocab = vocab_training.train_sentencepiece(_sentences(1000), 500, str(tmp_path),
                                             control_symbols=())
  assert vocab.added_tokens == {}
  for text in SAMPLE:
    assert vocab.encode_tf(tf.constant(text)).numpy().tolist() == list(vocab.encode(text))
