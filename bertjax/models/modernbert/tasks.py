"""ModernBERT's transformers task classes, ModernBertFor{SequenceClassification,
TokenClassification, QuestionAnswering, MultipleChoice}: ModernBertModel + the task heads
of models.common.task_heads, each head being ModernBERT's own layout: dense, activation,
norm (model.prediction_transform), dropout, then the output layer.

Pooling (`classifier_pooling`): 'cls' reads the first position ([CLS]); for multiple
choice the first real token, as transformers does for left-padded rows; 'mean' averages the
real tokens.
"""
import flax.linen as nn
import jax
import jax.numpy as jnp

from bertjax.models.bert.tasks import classifier_dropout
from bertjax.models.common import task_heads as heads
from bertjax.models.modernbert.model import ModernBertConfig, ModernBertModel, prediction_transform

KINDS = ("ForSequenceClassification", "ForTokenClassification", "ForQuestionAnswering",
         "ForMultipleChoice")


class Head(nn.Module):
  """dense -> activation -> norm -> dropout -> linear (with bias), in float32: params
  `dense`, `norm`, `out`."""
  config: ModernBertConfig
  num_outputs: int

  @nn.compact
  def __call__(self, x: jax.Array, *, deterministic: bool = True) -> jax.Array:
    h = prediction_transform(self.config, x.astype(jnp.float32), jnp.float32)
    h = nn.Dropout(classifier_dropout(self.config))(h, deterministic=deterministic)
    return heads.dense_layer(self.num_outputs, self.config.initializer_range, "out")(h)


def _pooled(outputs: dict, attention_mask, pooling: str, first_real_token: bool) -> jax.Array:
  if pooling == "cls" and first_real_token and attention_mask is not None:
    first = jnp.argmax(attention_mask, axis=-1)
    return jnp.take_along_axis(outputs["last_hidden_state"], first[:, None, None], axis=1)[:, 0]
  return heads.pool(outputs, attention_mask, pooling)


class _Classifies:
  """The pooled sequence through `Head` (shared by the sequence and choice classifiers)."""
  FIRST_REAL_TOKEN = False

  def classify(self, outputs: dict, attention_mask, num_outputs: int, deterministic: bool):
    pooled = _pooled(outputs, attention_mask, self.config.classifier_pooling,
                     self.FIRST_REAL_TOKEN)
    return Head(self.config, num_outputs, name="head")(pooled, deterministic=deterministic)

  def pooling_kind(self) -> str:
    return self.config.classifier_pooling


class SequenceClassifier(_Classifies, heads.SequenceClassifier):
  config: ModernBertConfig = None


class MultipleChoice(_Classifies, heads.MultipleChoice):
  config: ModernBertConfig = None
  FIRST_REAL_TOKEN = True


class TokenClassifier(heads.TokenClassifier):
  config: ModernBertConfig = None

  @nn.compact
  def __call__(self, input_ids, attention_mask=None, token_type_ids=None, position_ids=None, *,
               deterministic: bool = True, output_hidden_states: bool = False, **inputs) -> dict:
    out = self.encode(dict(inputs, input_ids=input_ids, attention_mask=attention_mask,
                           token_type_ids=token_type_ids, position_ids=position_ids),
                      deterministic, output_hidden_states)
    logits = Head(self.config, self.num_labels, name="head")(out["last_hidden_state"],
                                                             deterministic=deterministic)
    return {**self.passed_through(out), "logits": logits}


class SpanExtractor(heads.SpanExtractor):
  config: ModernBertConfig = None

  def span_logits(self, hidden: jax.Array, inputs: dict, deterministic: bool) -> jax.Array:
    del inputs
    return Head(self.config, 2, name="head")(hidden, deterministic=deterministic)


def task_model(kind: str, config: ModernBertConfig) -> nn.Module:
  """transformers' ModernBert<kind>."""
  encoder = ModernBertModel(config)
  init_std = config.initializer_range
  if kind == "ForSequenceClassification":
    return SequenceClassifier(encoder, config.num_labels, init_std=init_std, config=config)
  if kind == "ForMultipleChoice":
    return MultipleChoice(encoder, init_std=init_std, config=config)
  if kind == "ForTokenClassification":
    return TokenClassifier(encoder, config.num_labels, init_std=init_std, config=config)
  if kind == "ForQuestionAnswering":
    return SpanExtractor(encoder, init_std, config=config)
  raise ValueError(f"ModernBERT has no task class {kind!r}; it has {KINDS}.")
