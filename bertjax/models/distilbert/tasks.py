"""DistilBERT's transformers task classes, DistilBertFor{SequenceClassification,
TokenClassification, QuestionAnswering, MultipleChoice}: DistilBertModel + the heads of
models.common.task_heads. Sequence classification and multiple choice read [CLS]
through `pre_classifier` + ReLU (no pooler exists); each head has its own dropout.
"""
import flax.linen as nn

from bertjax.models.bert.tasks import KINDS
from bertjax.models.common import task_heads as heads
from bertjax.models.distilbert.model import DistilBertConfig, DistilBertModel

__all__ = ["KINDS", "task_model"]


def task_model(kind: str, config: DistilBertConfig) -> nn.Module:
  """transformers' DistilBert<kind>."""
  head = dict(pooling="cls", dense_activation="relu", dropout_rate=config.seq_classif_dropout)
  return heads.build(kind, DistilBertModel(config), config.num_labels, config.initializer_range,
                     sequence=head, choice=head, token_dropout=config.hidden_dropout,
                     span_dropout=config.qa_dropout)
