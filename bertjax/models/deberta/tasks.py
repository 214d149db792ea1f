"""DeBERTa's transformers task classes, Deberta[V2]For{SequenceClassification,
TokenClassification, QuestionAnswering} and DebertaV2ForMultipleChoice (v1 has none):
DebertaModel + the heads of models.common.task_heads. Sequence classification and
multiple choice read [CLS] through the ContextPooler (dropout, dense, pooler_hidden_act),
then `cls_dropout` and the classifier.
"""
import flax.linen as nn

from bertjax.models.bert.tasks import KINDS, classifier_dropout
from bertjax.models.common import task_heads as heads
from bertjax.models.deberta.model import DebertaConfig, DebertaModel

KINDS_V1 = tuple(k for k in KINDS if k != "ForMultipleChoice")


def task_model(kind: str, config: DebertaConfig) -> nn.Module:
  """transformers' Deberta<kind> / DebertaV2<kind>."""
  pooled = dict(pooling="cls", first_dropout=config.pooler_dropout,
                dense_activation=config.pooler_hidden_act,
                dropout_rate=classifier_dropout(config))
  return heads.build(kind, DebertaModel(config), config.num_labels, config.initializer_range,
                     sequence=pooled, choice=pooled, token_dropout=config.hidden_dropout)
