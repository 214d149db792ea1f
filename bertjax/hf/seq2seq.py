"""What the encoder-decoder families (T5, BART) share in the HF bridge."""
from typing import Any, Mapping

import jax.numpy as jnp

from bertjax.hf.family import Family


class Seq2SeqFamily(Family):
  """A Family whose modules take `input_ids` and `decoder_input_ids` and return the
  reference's seq2seq outputs, including per-stack hidden states."""

  def init_inputs(self, config: Any) -> dict:
    ids = jnp.zeros((1, 8), jnp.int32)
    return {"input_ids": ids, "decoder_input_ids": ids}

  def outputs(self, architecture: str, outputs: Mapping[str, Any]) -> dict:
    names = self.architectures[architecture] + ("encoder_hidden_states", "decoder_hidden_states")
    return {k: v for k, v in outputs.items() if k in names and v is not None}
