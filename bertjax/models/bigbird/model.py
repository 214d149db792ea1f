"""BigBird (Zaheer et al., 2020): BERT / RoBERTa with block-sparse attention.

The architecture is BERT's (embeddings, post-LN layers, MLM / NSP heads; the released
"BigBird-RoBERTa" checkpoints use RoBERTa's vocabulary and gelu_new, but BERT's plain
0-based positions), with every self-attention layer replaced by BigBird's ITC pattern
(bertjax.layers.long_attention.sparse.BigBird): 2 global blocks, a 3-block sliding window and r random
blocks per query block. So the modules are BERT's, configured with `attention`.
"""
import dataclasses
from typing import Any

from bertjax.layers.long_attention import sparse
from bertjax.models import bert


@dataclasses.dataclass(frozen=True)
class BigBirdConfig(bert.BertConfig):
  vocab_size: int = 50358
  hidden_act: str = "gelu_new"
  max_position_embeddings: int = 4096
  type_vocab_size: int = 2
  attention: Any = sparse.BigBird(block_size=64, num_random_blocks=3)
  sep_token_id: int = 66  # BigBirdForQuestionAnswering: the question ends at the first [SEP]


def _size(layers: int, hidden: int, **overrides) -> BigBirdConfig:
  return BigBirdConfig(hidden_size=hidden, num_layers=layers, num_heads=hidden // 64,
                       intermediate_size=4 * hidden, **overrides)


def bigbird_roberta_base(**overrides) -> BigBirdConfig:
  """google/bigbird-roberta-base: 12 x 768, 4096 positions, block 64, 3 random blocks."""
  return _size(12, 768, **overrides)


def bigbird_roberta_large(**overrides) -> BigBirdConfig:
  return _size(24, 1024, **overrides)


SIZES = {"base": bigbird_roberta_base, "large": bigbird_roberta_large}

# The modules are BERT's; the config's `attention` makes them BigBird.
BigBirdModel = bert.BertModel
BigBirdForMaskedLM = bert.BertForMaskedLM
BigBirdForPreTraining = bert.BertForPreTraining
