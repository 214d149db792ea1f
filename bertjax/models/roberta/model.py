"""RoBERTa (Liu et al., 2019): BERT's architecture, trained differently.

What changes in the model is small: position ids start after the padding index
(fairseq's convention, `padding_idx + 1`), there is one token type, LayerNorm eps is
1e-5, and the LM head always uses GELU. Everything else that makes RoBERTa RoBERTa
lives outside the module: byte-level BPE (bertjax.data.vocabularies), MLM-only
pretraining with dynamic masking on FULL-SENTENCES / DOC-SENTENCES inputs
(bertjax.data), and Adam with beta2 0.98, eps 1e-6 (gin/optimizers/adamw_roberta.gin).
"""
import dataclasses
from typing import Optional

import flax.linen as nn
import jax
import jax.numpy as jnp

from bertjax.layers import embeddings
from bertjax.models import bert
from bertjax.models.common import positions


@dataclasses.dataclass(frozen=True)
class RobertaConfig(bert.BertConfig):
  vocab_size: int = 50265
  max_position_embeddings: int = 514  # 512 positions after the padding_idx + 1 offset
  type_vocab_size: int = 1
  layer_norm_eps: float = 1e-5
  pad_token_id: int = 1

  @property
  def max_positions(self) -> int | None:
    if positions.is_rotary(self):
      return None
    return self.max_position_embeddings - self.pad_token_id - 1  # rows up to the pad are unused


def _size(layers: int, hidden: int, **overrides) -> RobertaConfig:
  return RobertaConfig(hidden_size=hidden, num_layers=layers, num_heads=hidden // 64,
                       intermediate_size=4 * hidden, **overrides)


def roberta_base(**overrides) -> RobertaConfig:
  return _size(12, 768, **overrides)


def roberta_large(**overrides) -> RobertaConfig:
  return _size(24, 1024, **overrides)


SIZES = {"base": roberta_base, "large": roberta_large}


def position_ids_from_input_ids(input_ids: jax.Array, padding_idx: int) -> jax.Array:
  """fairseq / HF positions: real tokens count from padding_idx + 1, padding sits at padding_idx."""
  real = (input_ids != padding_idx).astype(jnp.int32)
  return jnp.cumsum(real, axis=-1) * real + padding_idx


def offset_position_ids(input_ids: jax.Array, padding_idx: int,
                        position_ids: Optional[jax.Array] = None,
                        max_positions: Optional[int] = None) -> jax.Array:
  """Rows of RoBERTa's position table for a batch.

  `position_ids` follow bertjax's batch contract (0-based, restarting per packed
  example) and are shifted by padding_idx + 1; without them, positions are derived
  from the padding in `input_ids` exactly as the reference does (refused when
  longer than `max_positions`: they would run past the table).
  """
  if position_ids is None:
    embeddings.check_length(input_ids.shape[-1], max_positions, "input_ids")
    return position_ids_from_input_ids(input_ids, padding_idx)
  return position_ids + padding_idx + 1


class RobertaModel(bert.BertModel):
  """BertModel with RoBERTa's offset positions (see `offset_position_ids`)."""
  config: RobertaConfig

  def __call__(self, input_ids, attention_mask=None, token_type_ids=None, position_ids=None,
               segment_ids=None, *, deterministic: bool = True,
               output_hidden_states: bool = False) -> dict:
    position_ids = offset_position_ids(input_ids, self.config.pad_token_id, position_ids,
                                       self.config.max_positions)
    return super().__call__(input_ids, attention_mask, token_type_ids, position_ids, segment_ids,
                            deterministic=deterministic,
                            output_hidden_states=output_hidden_states)


class RobertaForMaskedLM(nn.Module):
  """RoBERTa without pooler, with the (tied) LM head: `logits`."""
  config: RobertaConfig

  def setup(self):
    self.roberta = RobertaModel(self.config, add_pooling_layer=False)
    # The reference LM head applies GELU whatever `hidden_act` says.
    self.lm_head = bert.MlmHead(self.config.replace(hidden_act="gelu"))

  def __call__(self, input_ids, attention_mask=None, token_type_ids=None, position_ids=None,
               segment_ids=None, *, deterministic: bool = True,
               output_hidden_states: bool = False) -> dict:
    out = self.roberta(input_ids, attention_mask, token_type_ids, position_ids, segment_ids,
                       deterministic=deterministic, output_hidden_states=output_hidden_states)
    out["logits"] = self.lm_head(out["last_hidden_state"], self.roberta.embeddings.word_embeddings)
    return out
