"""GLUE features: sentence(s) and label of each example as encoder input arrays.

As in the BERT paper, a pair is fed as one sequence with the tokenizer's special tokens
between and around the texts (`[CLS] a [SEP] b [SEP]` with token types 0 / 1 for BERT;
each family's own layout otherwise: `features.Layout`), truncated longest-first, and the
head reads the pooled classifier vector (`heads.SequenceClassifier`). The tasks, their
readers and metrics are in bertjax.evaluation.glue.
"""
import numpy as np

from bertjax.evaluation.glue import PairExample
from bertjax.finetune.tokenization import Tokenizer


def convert_examples(examples: list[PairExample], tokenizer: Tokenizer,
                     max_length: int) -> dict[str, np.ndarray]:
  """Encoder inputs plus `labels` (int32 classes, or float32 scores for regression)."""
  ids_a = tokenizer.encode_batch([e.text_a for e in examples])
  has_b = examples and examples[0].text_b is not None
  ids_b = tokenizer.encode_batch([e.text_b for e in examples]) if has_b else [None] * len(ids_a)
  packed = [tokenizer.layout.encode(a, b, max_length) for a, b in zip(ids_a, ids_b)]
  arrays = tokenizer.layout.to_arrays([p[0] for p in packed], [p[1] for p in packed],
                                      max_length)
  labels = [e.label for e in examples]
  arrays["labels"] = np.asarray(labels, np.float32 if isinstance(labels[0], float)
                                else np.int32) if labels else np.zeros((0,), np.int32)
  return arrays
