"""CoNLL-2003 NER features: first-sub-token labelling, and word tags back from logits.

As in the BERT paper (Sec. 5.3), each word is labelled at its first sub-token and the
other pieces get no loss and no prediction; the predicted word tags are scored at
entity level with conlleval's rules (`bertjax.evaluation.conll.entity_scores`, which
also reads the files). Words are tokenised pre-split, as transformers does with
`is_split_into_words=True` (byte-level BPE with a space before every word), truncated
to the sequence length and laid out with the tokenizer's special tokens. Inputs are
single sentences (the paper additionally used document context).
"""
import numpy as np

from bertjax.evaluation import conll
from bertjax.finetune.tokenization import Tokenizer


def convert_sentences(sentences: list[conll.Sentence], tokenizer: Tokenizer, max_seq_length: int,
                      labels: tuple[str, ...] = conll.LABELS) -> dict[str, np.ndarray]:
  """Encoder inputs, `labels`/`label_weights` [N, L] (set at each word's first piece)
  and `first_piece` [N, W]: that position per word, -1 for a word whose first piece is
  cut off by `max_seq_length` or that has no pieces (it is then predicted "O")."""
  layout = tokenizer.layout
  budget = max_seq_length - layout.num_special(pair=False)
  rows, types, firsts = [], [], []
  for sentence in sentences:
    pieces, first = [], {}
    for w, word_pieces in enumerate(tokenizer.encode_words(sentence.words)):
      if word_pieces and len(pieces) < budget:
        first[w] = len(pieces)
      pieces += word_pieces
    ids, row_types, starts = layout.pack(pieces[:max(budget, 0)])
    shift = layout.padding(len(ids), max_seq_length) + starts["A"]
    rows.append(ids)
    types.append(row_types)
    firsts.append({w: p + shift for w, p in first.items()})
  arrays = layout.to_arrays(rows, types, max_seq_length)
  n = len(sentences)
  max_words = max((len(s.words) for s in sentences), default=1)
  arrays.update(labels=np.zeros((n, max_seq_length), np.int32),
                label_weights=np.zeros((n, max_seq_length), np.float32),
                first_piece=np.full((n, max_words), -1, np.int32))
  for row, (sentence, first) in enumerate(zip(sentences, firsts)):
    for w, position in first.items():
      arrays["first_piece"][row, w] = position
      arrays["labels"][row, position] = labels.index(sentence.tags[w])
      arrays["label_weights"][row, position] = 1.0
  return arrays


def word_tags(logits: np.ndarray, first_piece: np.ndarray, sentences: list[conll.Sentence],
              labels: tuple[str, ...] = conll.LABELS) -> list[list[str]]:
  """Predicted tag of every word: argmax at its first piece, "O" where it has none."""
  predicted = []
  for row, sentence in enumerate(sentences):
    positions = first_piece[row, :len(sentence.words)]
    best = logits[row].argmax(-1)
    predicted.append([labels[best[p]] if p >= 0 else "O" for p in positions])
  return predicted


def evaluate(logits: np.ndarray, features: dict[str, np.ndarray],
             sentences: list[conll.Sentence],
             labels: tuple[str, ...] = conll.LABELS) -> dict[str, object]:
  """conlleval entity precision / recall / F1 (fractions) plus the count of words that
  got no prediction (cut off by the sequence length); `labels`: the logits' tags."""
  predicted = word_tags(logits, features["first_piece"], sentences, labels)
  scores = conll.entity_scores([list(s.tags) for s in sentences], predicted)
  unlabelled = sum(int((features["first_piece"][r, :len(s.words)] < 0).sum())
                   for r, s in enumerate(sentences))
  return {**scores, "words_without_prediction": unlabelled}
