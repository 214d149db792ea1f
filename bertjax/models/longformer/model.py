"""Longformer (Beltagy et al., 2020): RoBERTa with sliding-window + global attention.

The model is RoBERTa's (offset positions, one token type, LayerNorm eps 1e-5, GELU LM
head) with every self-attention layer replaced by bertjax.layers.long_attention.sparse.Longformer: each
token sees w neighbours on each side (optionally dilated per head), and the tokens marked
in `global_attention_mask` ([CLS], question tokens...) see, and are seen by, every token
through their own query/key/value projections.
"""
import dataclasses
from typing import Any

import flax.linen as nn

from bertjax.layers.long_attention import sparse
from bertjax.models import bert, roberta


@dataclasses.dataclass(frozen=True)
class LongformerConfig(roberta.RobertaConfig):
  max_position_embeddings: int = 4098  # 4096 positions after the padding_idx + 1 offset
  # Global attention only where `global_attention_mask` asks for it (as transformers).
  attention: Any = sparse.Longformer(window=256, global_tokens=())
  # The task classes' default global attention reads the question's end: the first </s>.
  sep_token_id: int = 2


def _size(layers: int, hidden: int, **overrides) -> LongformerConfig:
  return LongformerConfig(hidden_size=hidden, num_layers=layers, num_heads=hidden // 64,
                          intermediate_size=4 * hidden, **overrides)


def longformer_base(**overrides) -> LongformerConfig:
  """allenai/longformer-base-4096: RoBERTa-base, attention_window 512 (w = 256)."""
  return _size(12, 768, **overrides)


def longformer_large(**overrides) -> LongformerConfig:
  return _size(24, 1024, **overrides)


SIZES = {"base": longformer_base, "large": longformer_large}


class LongformerModel(bert.BertModel):
  """BertModel with RoBERTa's offset positions and a `global_attention_mask` input."""
  config: LongformerConfig

  def __call__(self, input_ids, attention_mask=None, token_type_ids=None, position_ids=None,
               segment_ids=None, *, deterministic: bool = True,
               output_hidden_states: bool = False, global_attention_mask=None) -> dict:
    position_ids = roberta.offset_position_ids(input_ids, self.config.pad_token_id, position_ids,
                                               self.config.max_positions)
    return super().__call__(input_ids, attention_mask, token_type_ids, position_ids, segment_ids,
                            deterministic=deterministic,
                            output_hidden_states=output_hidden_states,
                            global_attention_mask=global_attention_mask)


class LongformerForMaskedLM(nn.Module):
  """Longformer without pooler, with RoBERTa's (tied) LM head: `logits`."""
  config: LongformerConfig

  def setup(self):
    self.longformer = LongformerModel(self.config, add_pooling_layer=False)
    self.lm_head = bert.MlmHead(self.config.replace(hidden_act="gelu"))

  def __call__(self, input_ids, attention_mask=None, token_type_ids=None, position_ids=None,
               segment_ids=None, *, deterministic: bool = True,
               output_hidden_states: bool = False, global_attention_mask=None) -> dict:
    out = self.longformer(input_ids, attention_mask, token_type_ids, position_ids, segment_ids,
                          deterministic=deterministic, output_hidden_states=output_hidden_states,
                          global_attention_mask=global_attention_mask)
    out["logits"] = self.lm_head(out["last_hidden_state"],
                                 self.longformer.embeddings.word_embeddings)
    return out
