"""Task heads over any bertjax encoder: the modules behind every family's transformers task
classes (`models/<family>/tasks.py`: BertForSequenceClassification, ...) and fine-tuning.

Every model here is `encoder` + `head`, so its params are
`{'encoder': <the encoder's own params>, 'head': {...}}` and pretrained weights drop
into the encoder subtree unchanged. The encoder is any module with the family
interface: called as `encoder(input_ids, attention_mask=, token_type_ids=, deterministic=)`
(plus whatever else the caller passes: XLNet's `mems`, Longformer's
`global_attention_mask`), returning `last_hidden_state`, `pooler_output` (None when the
family has no pooler) and, with `output_hidden_states`, `hidden_states`. A model returns
its own outputs (`logits`, or `start_logits` / `end_logits`) and the encoder's
PASSED_THROUGH ones.

The heads' fields cover every transformers layout: BERT's dropout + linear over the
pooler; RoBERTa's / ELECTRA's dense + activation between two dropouts over [CLS];
DistilBERT's dense + ReLU; DeBERTa's ContextPooler; XLNet's summary of the last token.
Families change what the encoder is given (`prepare`) and the span head
(`span_logits`) by subclassing.
"""
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp

from bertjax.layers import activations

POOLINGS = ("pooler", "cls", "last", "mean")
# Multiple-choice inputs that are not per choice: XLNet's memory ([layers, rows, M, H]).
SHARED_INPUTS = ("mems",)
# Encoder outputs a task model returns with its own, as transformers' task classes do.
PASSED_THROUGH = ("hidden_states", "mems")


def dense_layer(features: int, init_std: float, name: str, axes=("embed", None)) -> nn.Dense:
  """A float32 Dense layer of a head. The task dimension is tiny: replicate it (None),
  shard only the encoder width."""
  return nn.Dense(features, name=name, dtype=jnp.float32,
                  kernel_init=nn.with_logical_partitioning(nn.initializers.normal(init_std), axes),
                  bias_init=nn.with_logical_partitioning(nn.initializers.zeros, (axes[1],)))


def pool(outputs: dict, attention_mask: jax.Array | None, pooling: str) -> jax.Array:
  """One vector per sequence: the pooler's tanh([CLS]) (BERT paper), raw [CLS], the last
  position (XLNet's <cls>), or the mean over real tokens.

  "pooler" falls back to the raw [CLS] vector for encoders without a pooler.
  """
  hidden = outputs["last_hidden_state"]
  if pooling == "pooler" and outputs.get("pooler_output") is not None:
    return outputs["pooler_output"]
  if pooling in ("pooler", "cls"):
    return hidden[:, 0]
  if pooling == "last":
    return hidden[:, -1]
  if pooling == "mean":
    mask = (jnp.ones(hidden.shape[:2]) if attention_mask is None else attention_mask)
    mask = mask.astype(hidden.dtype)[..., None]
    return (hidden * mask).sum(1) / jnp.maximum(mask.sum(1), 1.0)
  raise ValueError(f"Unknown pooling {pooling!r}; use one of {POOLINGS}.")


def packed_examples(encoder: nn.Module, outputs: dict, segment_ids: jax.Array,
                    example_positions: jax.Array, pooling: str) -> dict:
  """A packed row's encoder outputs as one length-1 sequence per example slot: the
  [R * E, 1, H] hidden state a head pooling `pooling` reads (the example's first token;
  its last, or the mean of its tokens) and the pooler's output there, so the family's own
  head runs on it unchanged. Example slot e holds segment e + 1 (finetune.packing)."""
  hidden = outputs["last_hidden_state"]
  rows, slots = example_positions.shape
  member = segment_ids[:, None, :] == jnp.arange(1, slots + 1)[None, :, None]  # [R, E, L]
  first = jnp.maximum(example_positions, 0)
  if pooling == "mean":
    weights = member.astype(jnp.float32)
    pooled = (jnp.einsum("rel,rlh->reh", weights, hidden.astype(jnp.float32))
              / jnp.maximum(weights.sum(-1), 1.0)[..., None]).astype(hidden.dtype)
  else:
    position = first + jnp.maximum(member.sum(-1) - 1, 0) if pooling == "last" else first
    pooled = jnp.take_along_axis(hidden, position[..., None], axis=1)  # [R, E, H]
  pooled = pooled.reshape(rows * slots, 1, hidden.shape[-1])
  pooler_output = None
  if outputs.get("pooler_output") is not None:
    if not hasattr(encoder, "pooler"):
      raise ValueError(f"{type(encoder).__name__} returns a pooler_output but has no `pooler` "
                       "layer to apply at each packed example: run it unpacked.")
    pooler_output = jnp.tanh(encoder.pooler(pooled[:, 0]))  # BERT's pooler: tanh(dense)
  return {"last_hidden_state": pooled, "pooler_output": pooler_output}


class ClassifierHead(nn.Module):
  """[dropout -> dense -> activation] -> dropout -> linear, in float32.

  Without `dense_activation` it is BERT's head: dropout then the linear layer (the
  BERT paper's only new parameters for GLUE)."""
  num_outputs: int
  dropout_rate: float = 0.1
  init_std: float = 0.02
  dense_activation: str | None = None  # a hidden-size `dense` layer and its activation
  first_dropout: float = 0.0           # before `dense`

  @nn.compact
  def __call__(self, x: jax.Array, *, deterministic: bool = True) -> jax.Array:
    x = x.astype(jnp.float32)
    if self.dense_activation is not None:
      x = nn.Dropout(self.first_dropout)(x, deterministic=deterministic)
      x = dense_layer(x.shape[-1], self.init_std, "dense", ("embed", "mlp"))(x)
      x = activations.get_activation(self.dense_activation)(x)
    x = nn.Dropout(self.dropout_rate)(x, deterministic=deterministic)
    return dense_layer(self.num_outputs, self.init_std, "out")(x)


def _inputs(inputs: dict, input_ids, attention_mask, token_type_ids, position_ids) -> dict:
  return dict(inputs, input_ids=input_ids, attention_mask=attention_mask,
              token_type_ids=token_type_ids, position_ids=position_ids)


class _TaskModel(nn.Module):
  """What every task model shares: the encoder call and the hook that prepares its inputs."""

  def prepare(self, inputs: dict[str, Any]) -> dict[str, Any]:
    """The encoder's inputs (rows of [B, L] arrays); families add defaults here."""
    return inputs

  def encode(self, inputs: dict[str, Any], deterministic: bool,
             output_hidden_states: bool) -> dict:
    kwargs = {k: v for k, v in self.prepare(inputs).items() if v is not None}
    if output_hidden_states:
      kwargs["output_hidden_states"] = True
    return dict(self.encoder(deterministic=deterministic, **kwargs))

  @staticmethod
  def passed_through(outputs: dict) -> dict:
    return {k: outputs[k] for k in PASSED_THROUGH if outputs.get(k) is not None}


class SequenceClassifier(_TaskModel):
  """GLUE: `logits` [B, num_labels] from the pooled sequence (num_labels=1: regression)."""
  encoder: nn.Module
  num_labels: int
  pooling: str = "pooler"
  dropout_rate: float = 0.1
  dense_activation: str | None = None
  first_dropout: float = 0.0
  init_std: float = 0.02

  def classify(self, outputs: dict, attention_mask, num_outputs: int, deterministic: bool):
    head = ClassifierHead(num_outputs, self.dropout_rate, self.init_std, self.dense_activation,
                          self.first_dropout, name="head")
    return head(pool(outputs, attention_mask, self.pooling), deterministic=deterministic)

  def pooling_kind(self) -> str:
    """Where `classify` pools (read to pool packed examples alike)."""
    return self.pooling

  @nn.compact
  def __call__(self, input_ids, attention_mask=None, token_type_ids=None, position_ids=None, *,
               deterministic: bool = True, output_hidden_states: bool = False,
               example_positions=None, **inputs) -> dict:
    """example_positions: packed rows [R, E] (with `segment_ids`): `logits` [R, E, K],
    one per example slot (finetune.packing)."""
    out = self.encode(_inputs(inputs, input_ids, attention_mask, token_type_ids, position_ids),
                      deterministic, output_hidden_states)
    if example_positions is None:
      logits = self.classify(out, attention_mask, self.num_labels, deterministic)
      return {**self.passed_through(out), "logits": logits}
    if inputs.get("segment_ids") is None:
      raise ValueError("example_positions (packed rows) come with segment_ids.")
    pooled = packed_examples(self.encoder, out, inputs["segment_ids"], example_positions,
                             self.pooling_kind())
    rows, slots = example_positions.shape
    logits = self.classify(pooled, jnp.ones((rows * slots, 1), jnp.int32), self.num_labels,
                           deterministic)
    return {**self.passed_through(out), "logits": logits.reshape(rows, slots, -1)}


class MultipleChoice(SequenceClassifier):
  """SWAG: inputs [B, C, L] (one row per ending); one score per row -> `logits` [B, C].

  Every input but those in SHARED_INPUTS is [B, C, ...], flattened to [B * C, ...] rows
  for the encoder, so its outputs (hidden states, XLNet's memory) are per row, as in
  transformers."""
  num_labels: int = 1  # unused: one score per choice

  @nn.compact
  def __call__(self, input_ids, attention_mask=None, token_type_ids=None, position_ids=None, *,
               deterministic: bool = True, output_hidden_states: bool = False, **inputs) -> dict:
    batch, choices = input_ids.shape[:2]
    rows = lambda x: None if x is None else x.reshape(batch * choices, *x.shape[2:])
    inputs = _inputs(inputs, input_ids, attention_mask, token_type_ids, position_ids)
    out = self.encode({k: v if k in SHARED_INPUTS else rows(v) for k, v in inputs.items()},
                      deterministic, output_hidden_states)
    scores = self.classify(out, rows(attention_mask), 1, deterministic)
    return {**self.passed_through(out), "logits": scores.reshape(batch, choices)}


class TokenClassifier(_TaskModel):
  """NER: `logits` [B, L, num_labels] for every token (read at first sub-tokens)."""
  encoder: nn.Module
  num_labels: int
  dropout_rate: float = 0.1
  init_std: float = 0.02

  @nn.compact
  def __call__(self, input_ids, attention_mask=None, token_type_ids=None, position_ids=None, *,
               deterministic: bool = True, output_hidden_states: bool = False, **inputs) -> dict:
    out = self.encode(_inputs(inputs, input_ids, attention_mask, token_type_ids, position_ids),
                      deterministic, output_hidden_states)
    head = ClassifierHead(self.num_labels, self.dropout_rate, self.init_std, name="head")
    logits = head(out["last_hidden_state"], deterministic=deterministic)
    return {**self.passed_through(out), "logits": logits}


class SpanExtractor(_TaskModel):
  """SQuAD: a start vector S and end vector E; a token's start logit is S.T_i.

  Both live in one [H, 2] kernel (transformers' `qa_outputs`). For SQuAD 2.0 the [CLS]
  position's logits give the null score s_null = S.C + E.C (see squad.postprocess).
  """
  encoder: nn.Module
  init_std: float = 0.02
  dropout_rate: float = 0.0

  def span_logits(self, hidden: jax.Array, inputs: dict, deterministic: bool) -> jax.Array:
    """[B, L, 2] start / end logits from the encoder's last hidden state (`inputs`: the
    model's inputs, before `prepare`)."""
    del inputs
    head = ClassifierHead(2, self.dropout_rate, self.init_std, name="head")
    return head(hidden, deterministic=deterministic)

  @nn.compact
  def __call__(self, input_ids, attention_mask=None, token_type_ids=None, position_ids=None, *,
               deterministic: bool = True, output_hidden_states: bool = False, **inputs) -> dict:
    inputs = _inputs(inputs, input_ids, attention_mask, token_type_ids, position_ids)
    out = self.encode(inputs, deterministic, output_hidden_states)
    logits = self.span_logits(out["last_hidden_state"], inputs, deterministic)
    return {**self.passed_through(out), "start_logits": logits[..., 0],
            "end_logits": logits[..., 1]}


# The generic module of each kind of transformers task class.
KIND_MODULES: dict[str, type] = {
    "ForSequenceClassification": SequenceClassifier,
    "ForTokenClassification": TokenClassifier,
    "ForQuestionAnswering": SpanExtractor,
    "ForQuestionAnsweringSimple": SpanExtractor,
    "ForMultipleChoice": MultipleChoice,
}


def build(kind: str, encoder: nn.Module, num_labels: int, init_std: float, *, sequence: dict,
          choice: dict, token_dropout: float, span_dropout: float = 0.0,
          modules: dict[str, type] | None = None) -> nn.Module:
  """A family's transformers task class of `kind` ('ForSequenceClassification', ...) over
  `encoder`. `sequence` / `choice` are the SequenceClassifier / MultipleChoice head fields
  (pooling, dropout_rate, dense_activation, first_dropout); `modules` replaces the
  generic module of some kinds (a family's subclass)."""
  module = {**KIND_MODULES, **(modules or {})}.get(kind)
  if module is None:
    raise ValueError(f"Unknown task kind {kind!r}; known: {sorted(KIND_MODULES)}.")
  if issubclass(module, MultipleChoice):
    return module(encoder, init_std=init_std, **choice)
  if issubclass(module, SequenceClassifier):
    return module(encoder, num_labels, init_std=init_std, **sequence)
  if issubclass(module, TokenClassifier):
    return module(encoder, num_labels, token_dropout, init_std)
  return module(encoder, init_std, span_dropout)
