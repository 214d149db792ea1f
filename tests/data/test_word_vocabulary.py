"""The word vocabulary of word-embedding students: splitting, frequency order, [MASK] as
the unknown word, files, and bad files."""
import numpy as np
import pytest

from bertjax.data import word_vocabulary as wv


def test_split_words_keeps_sst2_tokens_and_mask():
  assert wv.split_words("It 's a well-made , funny film -- does n't [MASK] ...") == [
      "it", "'s", "a", "well-made", ",", "funny", "film", "--", "does", "n't", "[MASK]", "..."]


def test_build_orders_by_frequency_then_word_and_maps_mask_to_unk(tmp_path):
  vocab = wv.WordVocabulary.build(["b a a", ["c", "b", "a"], "[MASK] d"], min_count=1)
  assert vocab.words == ["<pad>", "<unk>", "a", "b", "c", "d"]
  assert vocab.encode(["a", "[MASK]", "zebra"]) == [2, vocab.unk_id, vocab.unk_id]
  assert wv.WordVocabulary.build(["b a a", "c b a"], min_count=2).words[2:] == ["a", "b"]
  assert len(wv.WordVocabulary.build(["b a a", "c b a"], max_size=3)) == 3
  path = tmp_path / "words.txt"
  vocab.save(str(path))
  loaded = wv.WordVocabulary.load(str(path))
  assert loaded.words == vocab.words and loaded.fingerprint() == vocab.fingerprint()


def test_encode_sentences_pads_and_truncates():
  vocab = wv.WordVocabulary.build(["a b c"])
  arrays = wv.encode_sentences(vocab, [["a", "b", "c", "a"], ["c"]], max_length=3)
  np.testing.assert_array_equal(arrays["input_ids"], [[2, 3, 4], [4, 0, 0]])
  np.testing.assert_array_equal(arrays["attention_mask"], [[1, 1, 1], [1, 0, 0]])


def test_bad_vocabulary_files_name_the_problem(tmp_path):
  with pytest.raises(FileNotFoundError, match="No word vocabulary"):
    wv.WordVocabulary.load(str(tmp_path / "missing.txt"))
  (tmp_path / "plain.txt").write_text("a\nb\n")
  with pytest.raises(ValueError, match=r"plain.txt: must start with \['<pad>', '<unk>'\]"):
    wv.WordVocabulary.load(str(tmp_path / "plain.txt"))
  (tmp_path / "twice.txt").write_text("<pad>\n<unk>\na\na\n")
  with pytest.raises(ValueError, match="'a' appears twice"):
    wv.WordVocabulary.load(str(tmp_path / "twice.txt"))
