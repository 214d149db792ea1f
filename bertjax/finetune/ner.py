"""CoNLL-2003 NER: the 4-column files, first-sub-token labelling, entity-level F1.

As in the BERT paper (Sec. 5.3), each word is labelled at its first WordPiece and the
other pieces get no loss and no prediction; the predicted word tags are scored at
entity level with conlleval's rules (`conlleval.entity_scores`). Inputs are single
sentences (the paper additionally used document context).
"""
import dataclasses
import os

import numpy as np

from bertjax import paths
from bertjax.evaluation import conlleval, readers
from bertjax.finetune.tokenization import WordPiece

LABELS = ("O", "B-PER", "I-PER", "B-ORG", "I-ORG", "B-LOC", "I-LOC", "B-MISC", "I-MISC")
SPLITS = {"train": "train.txt", "dev": "valid.txt", "test": "test.txt"}


@dataclasses.dataclass(frozen=True)
class Sentence:
  words: tuple[str, ...]
  tags: tuple[str, ...]
  source: str  # "file:first line"


def path(split: str, data_dir: str | None = None) -> str:
  if split not in SPLITS:
    raise ValueError(f"Unknown CoNLL-2003 split {split!r}; use one of {sorted(SPLITS)}.")
  return os.path.join(data_dir or paths.data_dir(), "conll2003", SPLITS[split])


def read_sentences(file: str, skip_log: readers.SkipLog,
                   labels: tuple[str, ...] = LABELS) -> list[Sentence]:
  """Sentences of a CoNLL file (`token POS chunk NER` lines, blank line between
  sentences, `-DOCSTART-` lines ignored). A sentence with a malformed line or a tag
  outside `labels` is reported at that line and skipped as a whole."""
  if not os.path.exists(file):
    raise FileNotFoundError(f"No CoNLL file at {file!r}.")
  sentences, words, tags, first_line, bad = [], [], [], 0, False

  def flush():
    if words and not bad:
      sentences.append(Sentence(tuple(words), tuple(tags), f"{file}:{first_line}"))

  with open(file, encoding="utf-8") as f:
    for line_no, line in enumerate(f, start=1):
      fields = line.split()
      if not fields or fields[0] == "-DOCSTART-":
        flush()
        words, tags, bad = [], [], False
        continue
      if not words and not bad:
        first_line = line_no
      if bad:
        continue
      if len(fields) != 4:
        skip_log.skip(file, line_no, f"expected 4 space-separated columns (token POS chunk "
                      f"NER), found {len(fields)}; sentence skipped")
        bad = True
      elif fields[3] not in labels:
        skip_log.skip(file, line_no, f"tag {fields[3]!r} not in the label set {labels}; "
                      f"sentence skipped")
        bad = True
      else:
        words.append(fields[0])
        tags.append(fields[3])
  flush()
  return sentences


def convert_sentences(sentences: list[Sentence], tokenizer: WordPiece, max_seq_length: int,
                      labels: tuple[str, ...] = LABELS) -> dict[str, np.ndarray]:
  """Encoder inputs, `labels`/`label_weights` [N, L] (set at each word's first piece)
  and `first_piece` [N, W]: that position per word, -1 for a word cut off by
  `max_seq_length` or with no pieces (it is then predicted "O")."""
  max_words = max((len(s.words) for s in sentences), default=1)
  n, length = len(sentences), max_seq_length
  arrays = {"input_ids": np.full((n, length), tokenizer.pad_id, np.int32),
            "attention_mask": np.zeros((n, length), np.int32),
            "token_type_ids": np.zeros((n, length), np.int32),
            "labels": np.zeros((n, length), np.int32),
            "label_weights": np.zeros((n, length), np.float32),
            "first_piece": np.full((n, max_words), -1, np.int32)}
  for row, sentence in enumerate(sentences):
    ids = [tokenizer.cls_id]
    for w, (pieces, tag) in enumerate(zip(tokenizer.encode_words(sentence.words),
                                          sentence.tags)):
      if not pieces or len(ids) + len(pieces) > length - 1:
        continue  # cut off (or nothing to label): predicted "O"
      arrays["first_piece"][row, w] = len(ids)
      arrays["labels"][row, len(ids)] = labels.index(tag)
      arrays["label_weights"][row, len(ids)] = 1.0
      ids += pieces
    ids.append(tokenizer.sep_id)
    arrays["input_ids"][row, :len(ids)] = ids
    arrays["attention_mask"][row, :len(ids)] = 1
  return arrays


def word_tags(logits: np.ndarray, first_piece: np.ndarray, sentences: list[Sentence],
              labels: tuple[str, ...] = LABELS) -> list[list[str]]:
  """Predicted tag of every word: argmax at its first piece, "O" where it has none."""
  predicted = []
  for row, sentence in enumerate(sentences):
    positions = first_piece[row, :len(sentence.words)]
    best = logits[row].argmax(-1)
    predicted.append([labels[best[p]] if p >= 0 else "O" for p in positions])
  return predicted


def evaluate(logits: np.ndarray, features: dict[str, np.ndarray],
             sentences: list[Sentence]) -> dict[str, object]:
  """conlleval entity precision / recall / F1 (fractions) plus the count of words that
  got no prediction (cut off by the sequence length)."""
  predicted = word_tags(logits, features["first_piece"], sentences)
  scores = conlleval.entity_scores([list(s.tags) for s in sentences], predicted)
  unlabelled = sum(int((features["first_piece"][r, :len(s.words)] < 0).sum())
                   for r, s in enumerate(sentences))
  return {**scores, "words_without_prediction": unlabelled}
