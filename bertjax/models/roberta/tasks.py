"""RoBERTa's transformers task classes, RobertaFor{SequenceClassification,
TokenClassification, QuestionAnswering, MultipleChoice}: RobertaModel + the heads of
models.common.task_heads. The sequence classifier reads [CLS] (<s>) through its own
dense + tanh (no pooler); multiple choice reads the pooler, as BERT's does.
"""
import flax.linen as nn

from bertjax.models.bert.tasks import KINDS, classifier_dropout  # noqa: F401 (KINDS: the same)
from bertjax.models.common import task_heads as heads
from bertjax.models.roberta.model import RobertaConfig, RobertaModel

POOLED = ("ForMultipleChoice",)


def classification_head(config, activation: str = "tanh") -> dict:
  """RobertaClassificationHead: dropout, dense, activation, dropout, out_proj over [CLS]
  (ELECTRA's, BigBird's and Longformer's have the same layout)."""
  dropout = classifier_dropout(config)
  return dict(pooling="cls", dense_activation=activation, first_dropout=dropout,
              dropout_rate=dropout)


def task_model(kind: str, config: RobertaConfig) -> nn.Module:
  """transformers' Roberta<kind>."""
  return heads.build(kind, RobertaModel(config, add_pooling_layer=kind in POOLED),
                     config.num_labels, config.initializer_range,
                     sequence=classification_head(config),
                     choice=dict(pooling="pooler", dropout_rate=config.hidden_dropout),
                     token_dropout=classifier_dropout(config))
