"""Token, absolute-position and token-type embeddings."""
from typing import Optional

import flax.linen as nn
import jax
import jax.numpy as jnp

from bertjax.layers import norms

Dtype = jnp.dtype


def embed_init(stddev: float):
  return nn.initializers.normal(stddev=stddev)


def check_length(length: int, max_positions: int | None, what: str = "input_ids",
                 fix: str | None = None) -> None:
  """Refuses a row longer than the position table: a lookup past the table reads NaN
  (jnp.take fills rows out of range), so the model would answer NaN, silently."""
  if max_positions is not None and length > max_positions:
    fix = fix or (f"Truncate inputs to at most {max_positions} tokens, or use a model with "
                  "more positions")
    raise ValueError(f"{what}: rows of {length} tokens, but the model has {max_positions} "
                     f"positions (max_position_embeddings); longer rows would read past its "
                     f"position table (NaN). {fix}.")


class Embed(nn.Module):
  """A lookup table whose rows are sharded along `axes[0]`.

  `attend` multiplies by the transposed table: the tied output projection of MLM heads.
  """
  num_embeddings: int
  features: int
  axes: tuple[Optional[str], str] = ("vocab", "embed")
  init_std: float = 0.02
  dtype: Dtype = jnp.float32

  def setup(self):
    self.embedding = self.param(
        "embedding", nn.with_logical_partitioning(embed_init(self.init_std), self.axes),
        (self.num_embeddings, self.features), jnp.float32)

  def __call__(self, ids: jax.Array) -> jax.Array:
    # Gather in the parameters' float32 and cast the rows, not the table: the same forward
    # values, but the gradient's scatter-add into the table then runs in float32. In bf16 it
    # is both less exact and, on a GPU, several times slower (BERT-base at 32 x 512 on an
    # H100: bf16 steps took longer than float32 ones before this change).
    return jnp.take(self.embedding, ids, axis=0).astype(self.dtype)

  def attend(self, x: jax.Array) -> jax.Array:
    return jnp.einsum("...e,ve->...v", x, jnp.asarray(self.embedding, self.dtype))


class TextEmbeddings(nn.Module):
  """word + absolute position + token type, then LayerNorm and dropout (BERT-style).

  `embedding_size` may differ from the encoder width (ALBERT factorizes it away with a
  projection outside this module). `type_vocab_size=0` drops token types (DistilBERT)
  and `max_position_embeddings=0` drops absolute positions (relative-position models).
  """
  vocab_size: int
  embedding_size: int
  max_position_embeddings: int = 512
  type_vocab_size: int = 2
  layer_norm_eps: float = 1e-12
  dropout_rate: float = 0.1
  init_std: float = 0.02
  dtype: Dtype = jnp.float32

  def setup(self):
    self.word_embeddings = Embed(self.vocab_size, self.embedding_size, ("vocab", "embed"),
                                 self.init_std, self.dtype)
    if self.max_position_embeddings:
      self.position_embeddings = Embed(self.max_position_embeddings, self.embedding_size,
                                       (None, "embed"), self.init_std, self.dtype)
    if self.type_vocab_size:
      self.token_type_embeddings = Embed(self.type_vocab_size, self.embedding_size,
                                         (None, "embed"), self.init_std, self.dtype)
    self.layer_norm = norms.LayerNorm(self.layer_norm_eps, self.dtype)
    self.dropout = nn.Dropout(self.dropout_rate)

  def __call__(self, input_ids, position_ids=None, token_type_ids=None, *,
               deterministic: bool = True) -> jax.Array:
    x = self.word_embeddings(input_ids)
    if self.max_position_embeddings:
      if position_ids is None:  # the shape says how far they go: refuse it now, not as NaN
        check_length(input_ids.shape[-1], self.max_position_embeddings, "input_ids")
        position_ids = jnp.broadcast_to(jnp.arange(input_ids.shape[-1]), input_ids.shape)
      x = x + self.position_embeddings(position_ids)
    if self.type_vocab_size:
      if token_type_ids is None:
        token_type_ids = jnp.zeros_like(input_ids)
      x = x + self.token_type_embeddings(token_type_ids)
    x = self.layer_norm(x)
    x = self.dropout(x, deterministic=deterministic)
    return nn.with_logical_constraint(x, ("batch", "length", "embed"))
