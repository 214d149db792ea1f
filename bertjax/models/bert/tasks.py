"""BERT's transformers task classes, BertFor{SequenceClassification, TokenClassification,
QuestionAnswering, MultipleChoice}: BertModel + the heads of models.common.task_heads.

    module = task_model("ForSequenceClassification", config)   # config.labels: the classes
"""
import flax.linen as nn

from bertjax.models.bert.model import BertConfig, BertModel
from bertjax.models.common import task_heads as heads

KINDS = ("ForSequenceClassification", "ForTokenClassification", "ForQuestionAnswering",
         "ForMultipleChoice")
# The kinds whose encoder keeps the pooler: their head reads its tanh([CLS]).
POOLED = ("ForSequenceClassification", "ForMultipleChoice")


def classifier_dropout(config) -> float:
  """transformers' `classifier_dropout`, which falls back to the hidden dropout."""
  return config.hidden_dropout if config.classifier_dropout is None else config.classifier_dropout


def task_model(kind: str, config: BertConfig) -> nn.Module:
  """transformers' Bert<kind>."""
  head = dict(pooling="pooler", dropout_rate=classifier_dropout(config))
  return heads.build(kind, BertModel(config, add_pooling_layer=kind in POOLED),
                     config.num_labels, config.initializer_range, sequence=head, choice=head,
                     token_dropout=classifier_dropout(config))
