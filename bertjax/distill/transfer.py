"""The transfer set a student learns from: the task's training examples, optionally
augmented (bertjax.data.augment), each as the teacher reads it (text) and as the
student reads it (words), with gold labels and, once scored, the teacher's logits.

Augmented examples have no gold label: once the teacher has scored them, their
`labels` are the teacher's argmax (read only when the loss mixes in labels,
LogitRegression.label_weight > 0).
"""
import dataclasses
import json
import os
from typing import Sequence

import numpy as np

from bertjax.data import word_vocabulary
from bertjax.data.augment import Augmenter
from bertjax.evaluation.glue import PairExample

Words = tuple[str, ...]
NO_LABEL = -1


def example_words(example: PairExample) -> tuple[Words, ...]:
  """(words of text_a,) or (words of text_a, words of text_b)."""
  texts = (example.text_a,) if example.text_b is None else (example.text_a, example.text_b)
  return tuple(tuple(word_vocabulary.split_words(t)) for t in texts)


@dataclasses.dataclass
class TransferSet:
  texts: list[tuple[str, ...]]       # per example, its sentence(s) as the teacher reads them
  words: list[tuple[Words, ...]]     # the same, split into the student's words
  labels: np.ndarray                 # [N] int32 gold class; NO_LABEL for augmented rows
  augmented: np.ndarray              # [N] bool
  teacher_logits: np.ndarray | None = None  # [N, C] once scored

  def __len__(self) -> int:
    return len(self.texts)

  @property
  def num_augmented(self) -> int:
    return int(self.augmented.sum())


def build(examples: Sequence[PairExample], augmenter: Augmenter | None = None,
          seed: int = 0) -> TransferSet:
  """The examples, each followed by its augmented copies (with an augmenter)."""
  rng = np.random.default_rng(seed)
  texts, words, labels, augmented = [], [], [], []
  for example in examples:
    sides = example_words(example)
    texts.append((example.text_a,) if example.text_b is None else (example.text_a,
                                                                   example.text_b))
    words.append(sides)
    labels.append(int(example.label))
    augmented.append(False)
    for copy in (augmenter.augment(sides, rng) if augmenter else []):
      texts.append(tuple(" ".join(side) for side in copy))
      words.append(copy)
      labels.append(NO_LABEL)
      augmented.append(True)
  return TransferSet(texts, words, np.asarray(labels, np.int32), np.asarray(augmented, bool))


def with_teacher(transfer: TransferSet, logits: np.ndarray) -> TransferSet:
  """`transfer` with the teacher's logits, and its argmax as the augmented rows' label."""
  logits = np.asarray(logits, np.float32)
  if logits.shape[0] != len(transfer):
    raise ValueError(f"{logits.shape[0]} teacher logits for {len(transfer)} examples.")
  labels = np.where(transfer.augmented, logits.argmax(-1), transfer.labels).astype(np.int32)
  return dataclasses.replace(transfer, labels=labels, teacher_logits=logits)


def originals(transfer: TransferSet) -> TransferSet:
  """The training examples alone, without their augmented copies."""
  keep = np.flatnonzero(~transfer.augmented)
  return TransferSet([transfer.texts[i] for i in keep], [transfer.words[i] for i in keep],
                     transfer.labels[keep], transfer.augmented[keep],
                     None if transfer.teacher_logits is None else transfer.teacher_logits[keep])


def save_jsonl(transfer: TransferSet, path: str) -> None:
  """One JSON row per example, in order: `texts` (the teacher's input), `words` (the
  student's), `augmented`, `label` (NO_LABEL for an unscored augmented row) and, once
  scored, `teacher_logits`. Written atomically (`load_jsonl` reads it back)."""
  tmp = f"{path}.tmp"
  with open(tmp, "w", encoding="utf-8") as f:
    for i, texts in enumerate(transfer.texts):
      row = {"texts": list(texts), "words": [list(side) for side in transfer.words[i]],
             "augmented": bool(transfer.augmented[i]), "label": int(transfer.labels[i])}
      if transfer.teacher_logits is not None:
        row["teacher_logits"] = [float(x) for x in transfer.teacher_logits[i]]
      f.write(json.dumps(row) + "\n")
  os.replace(tmp, path)


def load_jsonl(path: str) -> TransferSet:
  """The transfer set `save_jsonl` wrote; teacher logits when every row has them."""
  with open(path, encoding="utf-8") as f:
    rows = [json.loads(line) for line in f if line.strip()]
  if not rows or any("words" not in r for r in rows):
    raise ValueError(f"{path} holds no transfer set with the student's words; write it with "
                     "`python -m bertjax.distill.student --transfer_only --out=DIR`.")
  scored = all("teacher_logits" in r for r in rows)
  return TransferSet([tuple(r["texts"]) for r in rows],
                     [tuple(tuple(side) for side in r["words"]) for r in rows],
                     np.asarray([r["label"] for r in rows], np.int32),
                     np.asarray([r["augmented"] for r in rows], bool),
                     np.asarray([r["teacher_logits"] for r in rows], np.float32) if scored
                     else None)


def student_arrays(vocab: word_vocabulary.WordVocabulary, words: Sequence[tuple[Words, ...]],
                   max_length: int) -> dict[str, np.ndarray]:
  """`input_ids` / `attention_mask`: [N, L] for single sentences, [N, 2, L] for pairs."""
  sides = len(words[0]) if words else 1
  if any(len(w) != sides for w in words):
    raise ValueError("Examples mix single sentences and pairs.")
  per_side = [word_vocabulary.encode_sentences(vocab, [w[s] for w in words], max_length)
              for s in range(sides)]
  if sides == 1:
    return per_side[0]
  return {k: np.stack([p[k] for p in per_side], axis=1) for k in per_side[0]}
