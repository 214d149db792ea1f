"""SWAG features: one sequence per ending of each example.

Each ending becomes `[CLS] sent1 [SEP] sent2 ending_i [SEP]`; the head scores each
[CLS] with one vector and a softmax over the four scores is trained with cross-entropy
(`heads.MultipleChoice`). Reading the files and scoring: bertjax.evaluation.swag.
"""
import numpy as np

from bertjax.evaluation.swag import NUM_CHOICES, SwagExample
from bertjax.finetune import features
from bertjax.finetune.tokenization import WordPiece


def convert_examples(examples: list[SwagExample], tokenizer: WordPiece,
                     max_length: int) -> dict[str, np.ndarray]:
  """Encoder inputs [N, 4, L] (one row per ending) and `labels` [N]."""
  ids, types = [], []
  for example in examples:
    context = tokenizer.encode(example.context)
    for ending in example.endings:
      packed = features.encode_pair(context, tokenizer.encode(f"{example.start} {ending}"),
                                    max_length, tokenizer.cls_id, tokenizer.sep_id)
      ids.append(packed[0])
      types.append(packed[1])
  arrays = features.to_arrays(ids, types, max_length, tokenizer.pad_id)
  arrays = {k: v.reshape(len(examples), NUM_CHOICES, max_length) for k, v in arrays.items()}
  arrays["labels"] = np.asarray([e.label for e in examples], np.int32)
  return arrays
