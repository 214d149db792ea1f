"""ELECTRA's transformers task classes, ElectraFor{SequenceClassification,
TokenClassification, QuestionAnswering, MultipleChoice}: the discriminator's ElectraModel
+ the heads of models.common.task_heads. The sequence classifier is RoBERTa's head with
GELU; multiple choice reads the sequence summary (dense + summary_activation).
"""
import flax.linen as nn

from bertjax.models.bert.tasks import KINDS, classifier_dropout
from bertjax.models.common import task_heads as heads
from bertjax.models.electra.model import ElectraConfig, ElectraModel
from bertjax.models.roberta.tasks import classification_head

__all__ = ["KINDS", "SUMMARY_TYPES", "task_model"]

# transformers' summary_type -> our pooling.
SUMMARY_TYPES = {"first": "cls", "last": "last", "mean": "mean"}


def task_model(kind: str, config: ElectraConfig) -> nn.Module:
  """transformers' Electra<kind>."""
  summary = dict(pooling=SUMMARY_TYPES[config.summary_type],
                 dense_activation=config.summary_activation,
                 dropout_rate=config.summary_last_dropout)
  return heads.build(kind, ElectraModel(config), config.num_labels, config.initializer_range,
                     sequence=classification_head(config, "gelu"), choice=summary,
                     token_dropout=classifier_dropout(config))
