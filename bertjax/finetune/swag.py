"""SWAG features: one sequence per ending of each example.

Each ending becomes the pair (sent1, sent2 + ending_i) in the tokenizer's layout
(`[CLS] sent1 [SEP] sent2 ending_i [SEP]` for BERT); the head scores each classifier
vector with one vector and a softmax over the four scores is trained with cross-entropy
(`heads.MultipleChoice`). Reading the files and scoring: bertjax.evaluation.swag.
"""
import numpy as np

from bertjax.evaluation.swag import NUM_CHOICES, SwagExample
from bertjax.finetune.tokenization import Tokenizer


def convert_examples(examples: list[SwagExample], tokenizer: Tokenizer,
                     max_length: int) -> dict[str, np.ndarray]:
  """Encoder inputs [N, 4, L] (one row per ending) and `labels` [N]."""
  ids, types = [], []
  for example in examples:
    context = tokenizer.encode(example.context)
    for ending in example.endings:
      packed = tokenizer.layout.encode(context, tokenizer.encode(f"{example.start} {ending}"),
                                       max_length)
      ids.append(packed[0])
      types.append(packed[1])
  arrays = tokenizer.layout.to_arrays(ids, types, max_length)
  arrays = {k: v.reshape(len(examples), NUM_CHOICES, max_length) for k, v in arrays.items()}
  arrays["labels"] = np.asarray([e.label for e in examples], np.int32)
  return arrays
