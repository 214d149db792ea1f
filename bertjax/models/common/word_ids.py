"""The inputs every word-level student reads (the BiLSTM, the small Transformer): word ids
from a word vocabulary (bertjax.data.word_vocabulary, id 0 padding), [B, L] for single
sentences and [B, 2, L] for sentence pairs, with an optional attention mask."""
import jax


def checked_mask(model: str, pair: bool, input_ids: jax.Array,
                 attention_mask: jax.Array | None) -> jax.Array:
  """The attention mask (non-padding ids when not given), after checking the ids' layout."""
  if input_ids.ndim != (3 if pair else 2):
    layout = "[batch, 2, length] (a sentence pair)" if pair else "[batch, length]"
    raise ValueError(f"{model} (pair={pair}) takes input_ids of shape {layout}; got shape "
                     f"{tuple(input_ids.shape)}.")
  return (input_ids != 0) if attention_mask is None else attention_mask
