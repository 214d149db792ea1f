"""What T5 and BART share as encoder-decoders: the decoder's attention masks, and their
language-model classes' passing through to the model they wrap.

Masks are boolean, True = may attend (see bertjax.layers.attention). Packed batches
carry `encoder_segment_ids` / `decoder_segment_ids`; a decoder token then sees only its
own example's earlier tokens and its own example's encoder tokens.
"""
from typing import Optional

import flax.linen as nn
import jax

from bertjax.layers import attention


def decoder_masks(length: int, attention_mask: Optional[jax.Array] = None,
                  decoder_attention_mask: Optional[jax.Array] = None,
                  encoder_segment_ids: Optional[jax.Array] = None,
                  decoder_segment_ids: Optional[jax.Array] = None, *,
                  decode: bool = False) -> tuple[Optional[jax.Array], Optional[jax.Array]]:
  """(self-attention mask, cross-attention mask) of a decoder over `length` tokens.

  decode: one step of incremental decoding; the key/value cache masks the keys it has
  not filled yet, so only the cross-attention mask is returned.
  """
  cross = attention.combine_masks(
      None if attention_mask is None else attention.key_padding_mask(attention_mask),
      None if decoder_segment_ids is None or encoder_segment_ids is None
      else attention.segment_mask(decoder_segment_ids, encoder_segment_ids))
  if decode:
    return None, cross
  causal = attention.combine_masks(
      attention.causal_mask(length),
      None if decoder_attention_mask is None else attention.key_padding_mask(decoder_attention_mask),
      None if decoder_segment_ids is None else attention.segment_mask(decoder_segment_ids))
  return causal, cross


class WithLogits(nn.Module):
  """An encoder-decoder (`wrapped`) plus a vocabulary projection (`logits`), which its
  `decode` and `__call__` outputs gain; `encode` is the wrapped model's."""

  @property
  def wrapped(self) -> nn.Module:
    raise NotImplementedError

  def logits(self, hidden: jax.Array) -> jax.Array:
    raise NotImplementedError

  def encode(self, input_ids, attention_mask=None, *args, **kwargs) -> dict:
    return self.wrapped.encode(input_ids, attention_mask, *args, **kwargs)

  def decode(self, decoder_input_ids, encoder_hidden_states, attention_mask=None, **kwargs) -> dict:
    out = self.wrapped.decode(decoder_input_ids, encoder_hidden_states, attention_mask, **kwargs)
    out["logits"] = self.logits(out["last_hidden_state"])
    return out

  def __call__(self, input_ids, decoder_input_ids, attention_mask=None, **kwargs) -> dict:
    out = self.wrapped(input_ids, decoder_input_ids, attention_mask, **kwargs)
    out["logits"] = self.logits(out["last_hidden_state"])
    return out
