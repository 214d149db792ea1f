"""Longformer's transformers task classes, LongformerFor{SequenceClassification,
TokenClassification, QuestionAnswering, MultipleChoice}: LongformerModel + RoBERTa's heads
(every dropout the hidden dropout).

Without a `global_attention_mask` they choose the tokens with global attention as
transformers does: [CLS] for sequence classification, the question (the tokens before
the first </s>) for question answering, the tokens after the first </s></s> for
multiple choice; none for token classification.
"""
import flax.linen as nn
import jax.numpy as jnp

from bertjax.models.common import task_heads as heads
from bertjax.models.longformer.model import LongformerConfig, LongformerModel
from bertjax.models.roberta import tasks as roberta_tasks

KINDS = roberta_tasks.KINDS
POOLED = roberta_tasks.POOLED


def _global_default(module, inputs: dict, choose) -> dict:
  if inputs.get("global_attention_mask") is not None:
    return inputs
  ids = inputs["input_ids"]
  positions = jnp.arange(ids.shape[-1])[None]
  first_sep = jnp.argmax(ids == module.encoder.config.sep_token_id, axis=-1)[:, None]
  return {**inputs, "global_attention_mask": choose(positions, first_sep).astype(jnp.int32)}


class LongformerForSequenceClassification(heads.SequenceClassifier):
  def prepare(self, inputs: dict) -> dict:
    return _global_default(self, inputs, lambda positions, sep: positions == 0)


class LongformerForQuestionAnswering(heads.SpanExtractor):
  def prepare(self, inputs: dict) -> dict:
    return _global_default(self, inputs, lambda positions, sep: positions < sep)


class LongformerForMultipleChoice(heads.MultipleChoice):
  def prepare(self, inputs: dict) -> dict:
    return _global_default(self, inputs, lambda positions, sep: positions > sep + 1)


def task_model(kind: str, config: LongformerConfig) -> nn.Module:
  """transformers' Longformer<kind>."""
  dropout = config.hidden_dropout
  return heads.build(kind, LongformerModel(config, add_pooling_layer=kind in POOLED),
                     config.num_labels, config.initializer_range,
                     sequence=dict(pooling="cls", dense_activation="tanh",
                                   first_dropout=dropout, dropout_rate=dropout),
                     choice=dict(pooling="pooler", dropout_rate=dropout), token_dropout=dropout,
                     modules={"ForSequenceClassification": LongformerForSequenceClassification,
                              "ForQuestionAnswering": LongformerForQuestionAnswering,
                              "ForMultipleChoice": LongformerForMultipleChoice})
