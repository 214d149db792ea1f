"""The `bilm` recipe: words and character ids as ELMo's scheme has them, sentences in
<S> ... </S> end to end, forward / backward targets, and the word vocabulary."""
import hypothesis
from hypothesis import strategies as st
import numpy as np
import pytest
import seqio
import tensorflow as tf

from bertjax.data import lm_word_vocabulary as wv, recipes, sources
from bertjax.data.preprocessors import stats
from bertjax.data.recipes import bilm
from bertjax import characters

DOCS = ["The cat sat.\nIt was happy, very happy!", "",
        "Dogs bark.\n\n" + "x" * 60 + " ends here"]


def _source(docs=DOCS):
  def dataset_fn(split, shuffle_files, seed=None):
    del split, shuffle_files, seed
    return tf.data.Dataset.from_tensor_slices({"text": docs})
  return seqio.FunctionDataSource(dataset_fn, splits=("train", "validation"))


def test_words_split_on_spaces_and_every_symbol():
  assert wv.split_words("Don't stop_now,\u00a0café—3.5") == [
      "Don", "'", "t", "stop_now", ",", "café", "—", "3", ".", "5"]


@hypothesis.settings(max_examples=40, deadline=None)
@hypothesis.given(st.lists(st.text(min_size=1, max_size=70).filter(lambda w: w.strip() == w
                                                                   and " " not in w),
                           min_size=1, max_size=4),
                  st.sampled_from([12, 50]))
def test_character_ids_in_tf_equal_the_python_scheme(words, width):
  words = words + [characters.BOS_WORD, characters.EOS_WORD]
  got = bilm.char_ids_tf(tf.constant(words), width).numpy()
  np.testing.assert_array_equal(got, np.stack([characters.word_ids(w, width) for w in words]))


def test_vocabulary_ranks_by_frequency_and_round_trips(tmp_path):
  vocab = wv.lm_word_vocabulary(size=5, source=_source())
  assert vocab.words[:4] == list(wv.SPECIALS)
  assert vocab.words[4:6] == [".", "happy"]  # 3 and 2 occurrences; then ties in byte order
  assert len(vocab.words) == 9 and vocab.vocab_size == 9
  assert vocab.encode("happy cat!") == [5, vocab.unk_id, vocab.words.index("!")]
  vocab.save(str(tmp_path / "vocab.txt"))
  assert wv.LMWordVocabulary.from_file(str(tmp_path / "vocab.txt")) == vocab
  (tmp_path / "bad.txt").write_text("the\ncat\n")
  with pytest.raises(ValueError, match="bad.txt: a word vocabulary file starts with"):
    wv.LMWordVocabulary.from_file(str(tmp_path / "bad.txt"))


def test_rows_hold_sentences_end_to_end_with_both_targets():
  before = stats.snapshot().get("bilm/truncated_long_words", 0)
  vocab = wv.lm_word_vocabulary(size=14, source=_source())  # all words but the long one
  rows = list(recipes.get_dataset("bilm", sequence_length=8, batch_size=1, vocabulary=vocab,
                                  source=_source(), shuffle=False, num_epochs=1,
                                  drop_remainder=False).as_numpy_iterator())
  ids = np.concatenate([r["input_ids"][0] for r in rows])
  words = [vocab.words[i] for i in ids if i]
  expected = ("<S> The cat sat . </S> <S> It was happy , very happy ! </S> "
              "<S> Dogs bark . </S> <S> <UNK> ends here </S>").split()
  assert words == expected  # the empty document and the empty line are dropped
  assert stats.snapshot()["bilm/truncated_long_words"] - before == 1
  for row in rows:
    r = {k: v[0] for k, v in row.items()}
    real = r["attention_mask"].astype(bool)
    assert r["char_ids"].shape == (8, 50) and not r["char_ids"][~real].any()
    for t in np.flatnonzero(real):
      word = vocab.words[r["input_ids"][t]]
      if word != "<UNK>":
        np.testing.assert_array_equal(r["char_ids"][t], characters.word_ids(word))
      following = r["input_ids"][t + 1] if t + 1 < 8 else 0
      preceding = r["input_ids"][t - 1] if t else 0
      assert r["forward_targets"][t] == (0 if following == vocab.bos_id else following)
      assert r["backward_targets"][t] == (0 if preceding == vocab.eos_id else preceding)
  first = rows[0]  # <S> The cat sat . </S> <S> It
  ids = [vocab.words.index(w) for w in "The cat sat . </S>".split()]
  assert first["forward_targets"][0].tolist() == ids + [0, vocab.words.index("It"), 0]
  assert first["backward_targets"][0].tolist()[:3] == [0, vocab.bos_id, ids[0]]
  assert first["backward_targets"][0].tolist()[6] == 0  # the next sentence's <S>: none


def test_the_recipe_needs_a_word_vocabulary():
  with pytest.raises(ValueError, match="give it a word vocabulary.*@lm_word_vocabulary"):
    recipes.get_dataset("bilm", sequence_length=8, batch_size=1, source=_source())


def test_local_text_files_feed_the_recipe(tmp_path):
  (tmp_path / "train.txt").write_text("The cat sat .\nIt sat .\n\nDogs bark .\n")
  source = sources.text_files(str(tmp_path / "train.txt"))
  assert [ex["text"] for ex in source.get_dataset("train", shuffle=False).as_numpy_iterator()] \
      == [b"The cat sat .\nIt sat .", b"Dogs bark ."]
  vocab = wv.lm_word_vocabulary(size=10, source=source)
  assert vocab.words[4:6] == [".", "sat"]
  with pytest.raises(FileNotFoundError, match="gin text_files.validation: No files match"):
    sources.text_files(str(tmp_path / "train.txt"), str(tmp_path / "valid*.txt"))
