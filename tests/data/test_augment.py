"""Tang et al.'s augmentation: masking rate, POS-preserving replacement, contiguous
n-grams, distinct copies; and the POS lexicon it relies on."""
import hypothesis
import numpy as np
import pytest
from hypothesis import strategies as st

from bertjax.data import augment, pos_lexicon
from bertjax.data.word_vocabulary import MASK

TAGGED = [("the", "DT"), ("a", "DT"), ("film", "NN"), ("movie", "NN"), ("plot", "NN"),
          ("good", "JJ"), ("bad", "JJ"), ("dull", "JJ"), ("runs", "VBZ"), ("is", "VBZ"),
          ("slowly", "RB"), (".", "."), ("film", "NN"), ("The", "DT")]
LEXICON = pos_lexicon.PosLexicon.from_pairs(TAGGED)
CORPUS = [["the", "film", "is", "good", "."], ["a", "movie", "runs", "slowly", "."],
          ["the", "plot", "is", "dull", "."], ["a", "bad", "movie", "."]]
VOCAB = sorted({w for s in CORPUS for w in s})
sentences = st.lists(st.sampled_from(VOCAB), min_size=1, max_size=12)


def _augmenter(**config):
  return augment.Augmenter(augment.AugmentConfig(**config), LEXICON, CORPUS)


def test_masking_rate_is_p_mask():
  rng = np.random.default_rng(0)
  words = ["film"] * 20000
  out = _augmenter(p_mask=0.1, p_pos=0.0, p_ngram=0.0).augment_sentence(words, rng)
  assert len(out) == len(words) and set(out) <= {"film", MASK}
  assert abs(out.count(MASK) / len(words) - 0.1) < 0.01  # 5 standard deviations


@hypothesis.settings(max_examples=40, deadline=None)
@hypothesis.given(sentences, st.integers(0, 2**31))
def test_replacements_keep_the_pos_tag_and_come_from_the_training_words(words, seed):
  aug = _augmenter(p_mask=0.0, p_pos=1.0, p_ngram=0.0)
  out = aug.augment_sentence(words, np.random.default_rng(seed))
  assert len(out) == len(words)
  for old, new in zip(words, out):
    assert LEXICON.tag(new) == LEXICON.tag(old) and new in VOCAB


@hypothesis.settings(max_examples=40, deadline=None)
@hypothesis.given(sentences, st.integers(0, 2**31))
def test_ngrams_are_contiguous_subsequences_of_one_to_five_words(words, seed):
  out = list(_augmenter(p_mask=0.0, p_pos=0.0, p_ngram=1.0).augment_sentence(
      words, np.random.default_rng(seed)))
  assert 1 <= len(out) <= min(5, len(words))
  assert any(words[i:i + len(out)] == out for i in range(len(words) - len(out) + 1))


@hypothesis.settings(max_examples=30, deadline=None)
@hypothesis.given(st.lists(sentences, min_size=1, max_size=2), st.integers(0, 2**31))
def test_copies_are_distinct_differ_from_the_original_and_keep_the_layout(example, seed):
  copies = _augmenter(copies=8).augment(example, np.random.default_rng(seed))
  original = tuple(tuple(s) for s in example)
  assert len(copies) <= 8 and len(set(copies)) == len(copies) and original not in copies
  for copy in copies:
    assert len(copy) == len(example) and all(copy)
    # Without n-gram sampling a side keeps its length; with it, it is at most 5 words.
    assert all(len(c) == len(s) or len(c) <= 5 for c, s in zip(copy, example))


def test_same_seed_same_copies_and_exclusive_per_word_choices():
  aug = _augmenter(p_mask=0.5, p_pos=0.5, p_ngram=0.0, copies=5)
  example = (CORPUS[0],)
  copies = aug.augment(example, np.random.default_rng(7))
  assert copies == aug.augment(example, np.random.default_rng(7)) and copies
  for (copy,) in copies:  # every word either masked or replaced by one of its tag
    assert all(new == MASK or LEXICON.tag(new) == LEXICON.tag(old)
               for old, new in zip(CORPUS[0], copy))
  with pytest.raises(ValueError, match="p_mask \\+ p_pos"):
    augment.AugmentConfig(p_mask=0.6, p_pos=0.6)
  with pytest.raises(ValueError, match="p_ngram"):
    augment.AugmentConfig(p_ngram=1.5)


def test_lexicon_tags_seen_words_by_majority_and_unseen_by_suffix_or_number(tmp_path):
  assert LEXICON.tag("The") == "DT" and LEXICON.tag("FILM") == "NN"
  lexicon = pos_lexicon.PosLexicon.from_pairs(
      [("quickly", "RB"), ("slowly", "RB"), ("walked", "VBD"), ("talked", "VBD"),
       ("walked", "VBN"), ("dog", "NN")])
  assert lexicon.tag("walked") == "VBD"  # 1 VBD vs 1 VBN: the first seen wins the tie
  assert lexicon.tag("gladly") == "RB" and lexicon.tag("jumped") == "VBD"
  assert lexicon.tag("1,234.5") == "CD" and lexicon.tag("zzz") == pos_lexicon.DEFAULT_TAG
  conll = tmp_path / "conll2003"
  conll.mkdir()
  (conll / "train.txt").write_text("-DOCSTART- -X- -X- O\n\nEU NNP B-NP B-ORG\nrejects VBZ "
                                   "B-VP O\n\nbroken NN\n")
  with pytest.raises(ValueError, match=r"train.txt:6: expected 4 columns"):
    pos_lexicon.PosLexicon.from_conll(data_dir=str(tmp_path))
