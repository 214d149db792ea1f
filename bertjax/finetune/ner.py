"""CoNLL-2003 NER features: first-sub-token labelling, and word tags back from logits.

As in the BERT paper (Sec. 5.3), each word is labelled at its first WordPiece and the
other pieces get no loss and no prediction; the predicted word tags are scored at
entity level with conlleval's rules (`bertjax.evaluation.conll.entity_scores`, which
also reads the files). Inputs are single sentences (the paper additionally used
document context).
"""
import numpy as np

from bertjax.evaluation import conll
from bertjax.finetune.tokenization import WordPiece


def convert_sentences(sentences: list[conll.Sentence], tokenizer: WordPiece, max_seq_length: int,
                      labels: tuple[str, ...] = conll.LABELS) -> dict[str, np.ndarray]:
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
             sentences: list[conll.Sentence]) -> dict[str, object]:
  """conlleval entity precision / recall / F1 (fractions) plus the count of words that
  got no prediction (cut off by the sequence length)."""
  predicted = word_tags(logits, features["first_piece"], sentences)
  scores = conll.entity_scores([list(s.tags) for s in sentences], predicted)
  unlabelled = sum(int((features["first_piece"][r, :len(s.words)] < 0).sum())
                   for r, s in enumerate(sentences))
  return {**scores, "words_without_prediction": unlabelled}
