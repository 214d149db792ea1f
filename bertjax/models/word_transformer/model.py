"""A small Transformer student: BERT's encoder over the BiLSTM student's word ids.

Tang et al. (2019) distil BERT into a BiLSTM; the natural second student is a small
Transformer of the same family as the teacher, trained from scratch on the same
transfer set (no pretraining), so the two students differ only in their encoder.

Single sentence: word ids -> BERT embeddings (word + position + segment) -> a few
Transformer layers (bertjax.models.bert.BertModel, no pooler) -> the mean of the real
words' states -> dropout -> logits. A sentence pair ([B, 2, L] ids, as the BiLSTM's) is
read as one sequence of 2L positions, the second sentence in segment 1 (BERT's
cross-attention over the pair rather than the BiLSTM's siamese encoding); the padding of
the first sentence stays in place, masked out.

Inputs follow bertjax.batch: word ids `input_ids` from a word vocabulary
(bertjax.data.word_vocabulary; id 0 is padding) and `attention_mask`.
"""
import dataclasses

import flax.linen as nn
import jax
import jax.numpy as jnp

from bertjax.models.bert.model import BertConfig, BertModel
from bertjax.models.common import word_ids


@dataclasses.dataclass(frozen=True)
class WordTransformerConfig:
  vocab_size: int
  num_labels: int = 2
  hidden_size: int = 256
  num_layers: int = 2
  num_heads: int = 4
  intermediate_size: int = 1024
  max_length: int = 64     # words per sentence (a pair: per side)
  pair: bool = False
  hidden_dropout: float = 0.1  # the attention weights' too

  def __post_init__(self):
    for name in ("vocab_size", "num_labels", "hidden_size", "num_layers", "num_heads",
                 "intermediate_size", "max_length"):
      if getattr(self, name) < 1:
        raise ValueError(f"WordTransformerConfig.{name} = {getattr(self, name)}: must be >= 1.")
    if self.hidden_size % self.num_heads:
      raise ValueError(f"WordTransformerConfig: hidden_size={self.hidden_size} is not a multiple "
                       f"of num_heads={self.num_heads}.")

  def encoder_config(self) -> BertConfig:
    return BertConfig(vocab_size=self.vocab_size, hidden_size=self.hidden_size,
                      num_layers=self.num_layers, num_heads=self.num_heads,
                      intermediate_size=self.intermediate_size,
                      hidden_dropout=self.hidden_dropout, attention_dropout=self.hidden_dropout,
                      max_position_embeddings=self.max_length * (2 if self.pair else 1))


class WordTransformerClassifier(nn.Module):
  """`logits` [B, num_labels] of single sentences ([B, L] ids) or, with `config.pair`, of
  sentence pairs ([B, 2, L] ids); also `sentence`, the pooled vector [B, H]."""
  config: WordTransformerConfig

  @nn.compact
  def __call__(self, input_ids: jax.Array, attention_mask: jax.Array | None = None, *,
               deterministic: bool = True) -> dict:
    cfg = self.config
    mask = word_ids.checked_mask("WordTransformerClassifier", cfg.pair, input_ids,
                                 attention_mask)
    batch, length = input_ids.shape[0], input_ids.shape[-1]
    segments = jnp.zeros_like(input_ids)
    if cfg.pair:  # [B, 2, L] -> [B, 2L], the second sentence in segment 1
      segments = jnp.broadcast_to(jnp.arange(2)[None, :, None], input_ids.shape)
      input_ids, mask, segments = (x.reshape(batch, 2 * length)
                                   for x in (input_ids, mask, segments))
    states = BertModel(cfg.encoder_config(), add_pooling_layer=False, name="encoder")(
        input_ids, mask.astype(jnp.int32), token_type_ids=segments.astype(jnp.int32),
        deterministic=deterministic)["last_hidden_state"]
    real = mask.astype(states.dtype)[..., None]
    sentence = (states * real).sum(1) / jnp.maximum(real.sum(1), 1.0)
    features = nn.Dropout(cfg.hidden_dropout)(sentence, deterministic=deterministic)
    logits = nn.Dense(cfg.num_labels, name="logits",
                      kernel_init=nn.with_logical_partitioning(
                          nn.initializers.normal(0.02), ("embed", None)))(features)
    return {"logits": logits, "sentence": sentence}
