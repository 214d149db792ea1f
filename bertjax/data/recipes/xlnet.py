"""XLNet's permutation LM recipe (span-based partial prediction) over per-row document
streams: row r of batch t+1 continues row r of batch t, for the memory carried between
train steps; half the segment pairs have a B from elsewhere, as XLNet's data has.

  ds = recipes.get_dataset('xlnet_plm', sequence_length={'input_ids': 512, 'target_ids': 85})
"""
import functools
from typing import Mapping, Optional

import gin

from bertjax import batch
from bertjax.data import feature_converters as fc
from bertjax.data.preprocessors import permutation
from bertjax.data.recipes import registry, roles, seq2seq

_XLNET_FEATURES = batch.task_features(batch.TOKENS + batch.PERMUTATION
                                      + batch.PERMUTATION_TARGETS)


@gin.configurable
def xlnet_preprocessors(vocab, batch_size: int, reuse_len: Optional[int] = None,
                        mask_alpha: int = 6, mask_beta: int = 1, max_span_length: int = 5,
                        order: str = "token", sentence_split: str = "newline",
                        random_b_prob: float = 0.5):
  """Tokenize, then XLNet's permutation-LM features over `batch_size` row streams
  that advance `reuse_len` tokens per step (None: half the sequence, XLNet's 256 of
  512); num_predict from the lengths. Segment B is text from elsewhere with probability
  `random_b_prob` (XLNet's data_utils: 0.5), else the text after A (0: always)."""
  return seq2seq.sentence_tokens(vocab, sentence_split) + [functools.partial(
      permutation.xlnet_plm, sep_id=roles.role(vocab, "sep"), cls_id=roles.role(vocab, "cls"),
      pad_id=roles.role(vocab, "pad"), batch_size=batch_size, reuse_len=reuse_len,
      mask_alpha=mask_alpha, mask_beta=mask_beta, max_span_length=max_span_length,
      order=order, random_b_prob=random_b_prob)]


@gin.configurable
def xlnet_lengths(sequence_length, predict_fraction: float = 1 / 6) -> Mapping[str, int]:
  """{'input_ids': L, 'target_ids': num_predict}; XLNet: 512 -> 85 (about L / 6)."""
  if isinstance(sequence_length, Mapping):
    return dict(sequence_length)
  return {"input_ids": sequence_length,
          "target_ids": max(1, int(sequence_length * predict_fraction))}


def _xlnet_converter(vocab, pack):
  return fc.XLNetFeatureConverter(pad_id=roles.role(vocab, "pad"), pack=pack)


registry.register("xlnet_plm", xlnet_preprocessors, _XLNET_FEATURES, _xlnet_converter,
                  sequence_lengths=xlnet_lengths, pack=False, row_streams=True, layout="xlnet")
