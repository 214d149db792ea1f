"""Feature-based NER (BERT paper, Table 7): a frozen encoder, a small trained tagger.

The encoder runs once over the data (`extract`): the hidden states of every layer are
read at each word's first piece and kept on the host. A tagger (BiLSTM + linear, as
in the paper) is then trained on one of the paper's feature choices:

  embeddings    the embedding layer output
  second_last   the second-to-last layer
  last          the last layer
  sum_last4     a learned weighted sum of the last four layers
  concat_last4  the last four layers concatenated
  sum_all       a learned weighted sum of all layers (embeddings included)

Weighted sums are ELMo's scalar mix (models.common.scalar_mix: softmax-normalised
scalar weights and a global scale), so "sum" starts as the plain average.
"""
import flax.linen as nn
import jax.numpy as jnp
import numpy as np

from bertjax.finetune import loop, packing
from bertjax.models.common.scalar_mix import ScalarMix
from bertjax.objectives import downstream as objectives

MODES = ("embeddings", "second_last", "last", "sum_last4", "concat_last4", "sum_all")


def layers_for(mode: str, num_states: int) -> list[int]:
  """Indices into hidden_states ([embeddings, layer 1, ..., layer N]) a mode reads."""
  table = {"embeddings": [0], "second_last": [num_states - 2], "last": [num_states - 1],
           "sum_last4": list(range(num_states - 4, num_states)),
           "concat_last4": list(range(num_states - 4, num_states)),
           "sum_all": list(range(num_states))}
  if mode not in table:
    raise ValueError(f"Unknown feature mode {mode!r}; use one of {MODES}.")
  if min(table[mode]) < 0:
    raise ValueError(f"Mode {mode!r} needs 4 layers but the encoder has {num_states - 1}.")
  return table[mode]


class FirstPieceStates(nn.Module):
  """All hidden states of a frozen encoder at each word's first piece: [B, W, S, H]
  (packed rows: first_piece [R, E, W] per example slot -> [R, E, W, S, H])."""
  encoder: nn.Module

  @nn.compact
  def __call__(self, input_ids, attention_mask, token_type_ids, first_piece, position_ids=None,
               segment_ids=None, *, deterministic: bool = True):
    packed = {k: v for k, v in (("position_ids", position_ids), ("segment_ids", segment_ids))
              if v is not None}
    out = self.encoder(input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids,
                       deterministic=True, output_hidden_states=True, **packed)
    states = jnp.moveaxis(out["hidden_states"], 0, 2)  # [B, L, S, H]
    index = jnp.maximum(first_piece, 0).reshape(len(first_piece), -1)[:, :, None, None]
    gathered = jnp.take_along_axis(states, index, axis=1)
    return {"states": gathered.reshape(*first_piece.shape, *gathered.shape[2:])}


_EXTRACT_INPUTS = ("input_ids", "attention_mask", "token_type_ids", "first_piece",
                   "position_ids", "segment_ids")


def extract(encoder: nn.Module, encoder_params, arrays: dict[str, np.ndarray],
            batch_size: int = 64, packer: packing.Packing | None = None) -> np.ndarray:
  """float16 [N, W, num_layers + 1, H] first-piece states (zeros for words without one),
  the encoder run on packed rows when `packer` is enabled."""
  inputs = {k: arrays[k] for k in _EXTRACT_INPUTS[:4]}
  module = FirstPieceStates(encoder)
  run = lambda rows, size: loop.predict(
      module, {"encoder": encoder_params}, rows, ("states",),
      lambda b: {k: b[k] for k in _EXTRACT_INPUTS if k in b}, size, untrim=False)["states"]
  if packer is not None and packer.enabled:
    packed = packing.pack(inputs, packer.max_examples_per_row, tight=True)
    # Each row's states hold E slots of W words: as many examples per batch as unpacked.
    states = packed.examples(run(packed.arrays,
                                 max(1, batch_size // packer.max_examples_per_row)))
  else:
    states = run(inputs, batch_size)
  states[arrays["first_piece"] < 0] = 0.0
  return states.astype(np.float16)


class FeatureTagger(nn.Module):
  """Features of one mode -> BiLSTM layers -> per-word tag logits."""
  mode: str
  num_labels: int
  lstm_size: int = 128
  lstm_layers: int = 2
  dropout_rate: float = 0.1

  @nn.compact
  def __call__(self, features, attention_mask, *, deterministic: bool = True) -> dict:
    x = features.astype(jnp.float32)  # [B, W, K, H], K = the mode's layers
    if self.mode in ("sum_last4", "sum_all"):
      x = ScalarMix()(x)
    else:
      x = x.reshape(*x.shape[:2], -1)  # one layer, or concat_last4
    lengths = attention_mask.sum(-1).astype(jnp.int32)
    for i in range(self.lstm_layers):
      x = nn.Dropout(self.dropout_rate)(x, deterministic=deterministic)
      forward = nn.RNN(nn.LSTMCell(self.lstm_size, name=f"lstm_{i}_forward"))
      backward = nn.RNN(nn.LSTMCell(self.lstm_size, name=f"lstm_{i}_backward"))
      x = nn.Bidirectional(forward, backward)(x, seq_lengths=lengths)
    x = nn.Dropout(self.dropout_rate)(x, deterministic=deterministic)
    return {"logits": nn.Dense(self.num_labels, name="out")(x)}


class WordTagging(objectives.TokenClassification):
  """Token cross-entropy over words, fed precomputed features instead of ids."""

  def model_inputs(self, batch):
    return {"features": batch["features"], "attention_mask": batch["attention_mask"]}

  @staticmethod
  def example_weights(batch):
    return jnp.ones(batch["features"].shape[0], jnp.float32)


def word_arrays(states: np.ndarray, first_piece: np.ndarray, labels: np.ndarray,
                mode: str) -> dict[str, np.ndarray]:
  """Training / prediction arrays over words for one mode.

  `labels` [N, L] holds tag ids at first-piece positions (ner.convert_sentences);
  they are moved to word positions here.
  """
  layers = layers_for(mode, states.shape[2])
  mask = (first_piece >= 0).astype(np.int32)
  word_labels = np.take_along_axis(labels, np.maximum(first_piece, 0), axis=1) * mask
  return {"features": states[:, :, layers], "attention_mask": mask,
          "labels": word_labels.astype(np.int32), "label_weights": mask.astype(np.float32)}
