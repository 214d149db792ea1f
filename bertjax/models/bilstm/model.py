"""The BiLSTM student of Tang et al. (2019), "Distilling Task-Specific Knowledge from
BERT into Simple Neural Networks": config, sizes and modules.

Single sentence: word embeddings -> one bidirectional LSTM layer -> the sentence vector
(by default the BiLSTM's outputs max-pooled over the words; `pooling='final'` takes the
forward and backward final states instead) -> a ReLU layer -> logits. Sentence pairs
(the siamese form): both sentences go through the same encoder, and the classifier
reads [h1; h2; h1 * h2; |h1 - h2|]. The paper's sizes: 300-d embeddings, 150 hidden units per
direction, a 200-unit ReLU layer (`tang_et_al`).

Inputs follow bertjax.batch: word ids `input_ids` [B, L] (a pair: [B, 2, L], the two
sentences stacked as SBERT's batcher does) and `attention_mask`; the ids come from a
word vocabulary (bertjax.data.word_vocabulary), id 0 is padding.
"""
import dataclasses

import flax.linen as nn
import jax
import jax.numpy as jnp

from bertjax.models.bilstm.lstm import LSTM
from bertjax.models.common import word_ids

POOLINGS = ("final", "max")


@dataclasses.dataclass(frozen=True)
class BiLSTMConfig:
  vocab_size: int
  num_labels: int = 2
  embedding_size: int = 300
  hidden_size: int = 150   # per direction
  mlp_size: int = 200      # the ReLU layer before the logits
  pooling: str = "max"     # 'max': max over words; 'final': [h_fwd(last word); h_bwd(first)]
  pair: bool = False       # siamese sentence-pair classifier
  hidden_dropout: float = 0.1
  embedding_init_std: float = 0.1

  def __post_init__(self):
    if self.pooling not in POOLINGS:
      raise ValueError(f"BiLSTMConfig.pooling = {self.pooling!r}: use one of {POOLINGS}.")
    for name in ("vocab_size", "num_labels", "embedding_size", "hidden_size", "mlp_size"):
      if getattr(self, name) < 1:
        raise ValueError(f"BiLSTMConfig.{name} = {getattr(self, name)}: must be >= 1.")

  @property
  def sentence_size(self) -> int:
    return 2 * self.hidden_size

  @property
  def features_size(self) -> int:
    """Width of what the classifier reads: h, or [h1; h2; h1 * h2; |h1 - h2|]."""
    return 4 * self.sentence_size if self.pair else self.sentence_size


def tang_et_al(vocab_size: int, num_labels: int = 2, pair: bool = False,
               **overrides) -> BiLSTMConfig:
  """The paper's sizes: 300-d embeddings, 150 units per direction, a 200-unit ReLU layer."""
  return BiLSTMConfig(vocab_size=vocab_size, num_labels=num_labels, pair=pair, **overrides)


class BiLSTMEncoder(nn.Module):
  """Word ids [B, L] -> sentence vectors [B, 2H] (and the per-word outputs [B, L, 2H])."""
  config: BiLSTMConfig

  @nn.compact
  def __call__(self, input_ids: jax.Array, attention_mask: jax.Array, *,
               deterministic: bool = True) -> dict:
    cfg = self.config
    x = nn.Embed(cfg.vocab_size, cfg.embedding_size, name="embedding",
                 embedding_init=nn.with_logical_partitioning(
                     nn.initializers.normal(cfg.embedding_init_std), ("vocab", "embed")))(
                         input_ids)
    x = nn.with_logical_constraint(x, ("batch", "length", "embed"))
    forward, h_forward = LSTM(cfg.hidden_size, name="forward")(x, attention_mask)
    backward, h_backward = LSTM(cfg.hidden_size, reverse=True, name="backward")(x, attention_mask)
    outputs = jnp.concatenate([forward, backward], -1)
    if cfg.pooling == "final":
      sentence = jnp.concatenate([h_forward, h_backward], -1)
    else:
      real = attention_mask.astype(bool)[..., None]
      sentence = jnp.max(jnp.where(real, outputs, -jnp.inf), axis=1)
      sentence = jnp.where(real.any(1), sentence, 0.0)  # an empty row: zeros, not -inf
    return {"sentence": sentence, "outputs": outputs}


class BiLSTMClassifier(nn.Module):
  """`logits` [B, num_labels] of single sentences ([B, L] ids) or, with `config.pair`,
  of sentence pairs ([B, 2, L] ids); also the sentence vectors (`sentence`: [B, 2H] or
  [B, 2, 2H])."""
  config: BiLSTMConfig

  @nn.compact
  def __call__(self, input_ids: jax.Array, attention_mask: jax.Array | None = None, *,
               deterministic: bool = True) -> dict:
    cfg = self.config
    mask = word_ids.checked_mask("BiLSTMClassifier", cfg.pair, input_ids, attention_mask)
    encoder = BiLSTMEncoder(cfg, name="encoder")
    if cfg.pair:
      batch, length = input_ids.shape[0], input_ids.shape[-1]
      flat = encoder(input_ids.reshape(2 * batch, length), mask.reshape(2 * batch, length),
                     deterministic=deterministic)["sentence"]
      sentence = flat.reshape(batch, 2, -1)
      h1, h2 = sentence[:, 0], sentence[:, 1]
      features = jnp.concatenate([h1, h2, h1 * h2, jnp.abs(h1 - h2)], -1)
    else:
      sentence = features = encoder(input_ids, mask, deterministic=deterministic)["sentence"]
    features = nn.Dropout(cfg.hidden_dropout)(features, deterministic=deterministic)
    hidden = nn.relu(_dense(cfg.mlp_size, ("lstm_features", "mlp"), "hidden")(features))
    hidden = nn.Dropout(cfg.hidden_dropout)(hidden, deterministic=deterministic)
    logits = _dense(cfg.num_labels, ("mlp", None), "logits")(hidden)
    return {"logits": logits, "sentence": sentence}


def _dense(features: int, axes: tuple, name: str) -> nn.Dense:
  return nn.Dense(features, name=name,
                  kernel_init=nn.with_logical_partitioning(nn.initializers.lecun_normal(), axes),
                  bias_init=nn.with_logical_partitioning(nn.initializers.zeros, axes[-1:]))
