"""ALBERT's transformers task classes, AlbertFor{SequenceClassification,
TokenClassification, QuestionAnswering, MultipleChoice}: AlbertModel + the heads of
models.common.task_heads, BERT's layout with ALBERT's `classifier_dropout_prob`.
"""
import flax.linen as nn

from bertjax.models.albert.model import AlbertConfig, AlbertModel
from bertjax.models.bert.tasks import KINDS, POOLED, classifier_dropout
from bertjax.models.common import task_heads as heads

__all__ = ["KINDS", "POOLED", "task_model"]


def task_model(kind: str, config: AlbertConfig) -> nn.Module:
  """transformers' Albert<kind>."""
  head = dict(pooling="pooler", dropout_rate=classifier_dropout(config))
  return heads.build(kind, AlbertModel(config, add_pooling_layer=kind in POOLED),
                     config.num_labels, config.initializer_range, sequence=head, choice=head,
                     token_dropout=classifier_dropout(config))
