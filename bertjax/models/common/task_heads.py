"""Task heads over any bertjax encoder.

Every model here is `encoder` + `head`, so its params are
`{'encoder': <the encoder's own params>, 'head': {...}}` and pretrained weights drop
into the encoder subtree unchanged (`loop.init_params`). The encoder is any module
with the family interface: called as
`encoder(input_ids, attention_mask=, token_type_ids=, deterministic=)`, returning
`last_hidden_state`, `pooler_output` (None when the family has no pooler) and, with
`output_hidden_states`, `hidden_states`.
"""
import flax.linen as nn
import jax
import jax.numpy as jnp

POOLINGS = ("pooler", "cls", "mean")


def _dense(features: int, init_std: float, name: str) -> nn.Dense:
  # The task dimension is tiny: replicate it (None), shard only the encoder width.
  return nn.Dense(features, name=name, dtype=jnp.float32,
                  kernel_init=nn.with_logical_partitioning(nn.initializers.normal(init_std),
                                                           ("embed", None)),
                  bias_init=nn.with_logical_partitioning(nn.initializers.zeros, (None,)))


def pool(outputs: dict, attention_mask: jax.Array | None, pooling: str) -> jax.Array:
  """One vector per sequence: the pooler's tanh([CLS]) (BERT paper), raw [CLS], or mean.

  "pooler" falls back to the raw [CLS] vector for encoders without a pooler.
  """
  hidden = outputs["last_hidden_state"]
  if pooling == "pooler" and outputs.get("pooler_output") is not None:
    return outputs["pooler_output"]
  if pooling in ("pooler", "cls"):
    return hidden[:, 0]
  if pooling == "mean":
    mask = (jnp.ones(hidden.shape[:2]) if attention_mask is None else attention_mask)
    mask = mask.astype(hidden.dtype)[..., None]
    return (hidden * mask).sum(1) / jnp.maximum(mask.sum(1), 1.0)
  raise ValueError(f"Unknown pooling {pooling!r}; use one of {POOLINGS}.")


class ClassifierHead(nn.Module):
  """Dropout then a linear layer: the BERT paper's only new parameters for GLUE."""
  num_outputs: int
  dropout_rate: float = 0.1
  init_std: float = 0.02

  @nn.compact
  def __call__(self, x: jax.Array, *, deterministic: bool = True) -> jax.Array:
    x = nn.Dropout(self.dropout_rate)(x, deterministic=deterministic)
    return _dense(self.num_outputs, self.init_std, "out")(x.astype(jnp.float32))


class SequenceClassifier(nn.Module):
  """GLUE: `logits` [B, num_labels] from the pooled sequence (num_labels=1: regression)."""
  encoder: nn.Module
  num_labels: int
  pooling: str = "pooler"
  dropout_rate: float = 0.1

  @nn.compact
  def __call__(self, input_ids, attention_mask=None, token_type_ids=None, *,
               deterministic: bool = True) -> dict:
    out = self.encoder(input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids,
                       deterministic=deterministic)
    pooled = pool(out, attention_mask, self.pooling)
    logits = ClassifierHead(self.num_labels, self.dropout_rate, name="head")(
        pooled, deterministic=deterministic)
    return {"logits": logits}


class SpanExtractor(nn.Module):
  """SQuAD: a start vector S and end vector E; a token's start logit is S.T_i.

  Both live in one [H, 2] kernel. For SQuAD 2.0 the [CLS] position's logits give the
  null score s_null = S.C + E.C (see squad.postprocess).
  """
  encoder: nn.Module
  init_std: float = 0.02

  @nn.compact
  def __call__(self, input_ids, attention_mask=None, token_type_ids=None, *,
               deterministic: bool = True) -> dict:
    out = self.encoder(input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids,
                       deterministic=deterministic)
    logits = _SpanHead(self.init_std, name="head")(out["last_hidden_state"])
    return {"start_logits": logits[..., 0], "end_logits": logits[..., 1]}


class _SpanHead(nn.Module):
  init_std: float = 0.02

  @nn.compact
  def __call__(self, hidden: jax.Array) -> jax.Array:
    return _dense(2, self.init_std, "span")(hidden.astype(jnp.float32))


class TokenClassifier(nn.Module):
  """NER: `logits` [B, L, num_labels] for every token (read at first sub-tokens)."""
  encoder: nn.Module
  num_labels: int
  dropout_rate: float = 0.1

  @nn.compact
  def __call__(self, input_ids, attention_mask=None, token_type_ids=None, *,
               deterministic: bool = True) -> dict:
    out = self.encoder(input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids,
                       deterministic=deterministic)
    logits = ClassifierHead(self.num_labels, self.dropout_rate, name="head")(
        out["last_hidden_state"], deterministic=deterministic)
    return {"logits": logits}


class MultipleChoice(nn.Module):
  """SWAG: inputs [B, C, L] (one row per ending); one [CLS] score each -> `logits` [B, C]."""
  encoder: nn.Module
  pooling: str = "pooler"
  dropout_rate: float = 0.1

  @nn.compact
  def __call__(self, input_ids, attention_mask=None, token_type_ids=None, *,
               deterministic: bool = True) -> dict:
    batch, choices, length = input_ids.shape
    flat = lambda x: None if x is None else x.reshape(batch * choices, length)
    attention_mask = flat(attention_mask)
    out = self.encoder(flat(input_ids), attention_mask=attention_mask,
                       token_type_ids=flat(token_type_ids), deterministic=deterministic)
    scores = ClassifierHead(1, self.dropout_rate, name="head")(
        pool(out, attention_mask, self.pooling), deterministic=deterministic)
    return {"logits": scores.reshape(batch, choices)}
