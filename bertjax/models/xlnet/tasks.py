"""XLNet's transformers task classes, XLNetFor{SequenceClassification, TokenClassification,
QuestionAnsweringSimple, MultipleChoice}: the content stream of XLNetModel + the heads of
models.common.task_heads. Sequence classification and multiple choice read the sequence
summary (XLNet: the last token, its <cls>; dense + tanh + dropout); the token and span
heads are linear layers (XLNetModel drops its output already). Every class takes and
returns `mems`.
"""
import flax.linen as nn

from bertjax.models.common import task_heads as heads
from bertjax.models.xlnet.model import XLNetConfig, XLNetModel

KINDS = ("ForSequenceClassification", "ForTokenClassification", "ForQuestionAnsweringSimple",
         "ForMultipleChoice")
# transformers' summary_type -> our pooling.
SUMMARY_TYPES = {"first": "cls", "last": "last", "mean": "mean"}


def task_model(kind: str, config: XLNetConfig) -> nn.Module:
  """transformers' XLNet<kind>."""
  summary = dict(pooling=SUMMARY_TYPES[config.summary_type], dense_activation="tanh",
                 dropout_rate=config.summary_last_dropout)
  return heads.build(kind, XLNetModel(config), config.num_labels, config.initializer_range,
                     sequence=summary, choice=summary, token_dropout=0.0)
