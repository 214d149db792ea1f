"""BigBird's transformers task classes, BigBirdFor{SequenceClassification,
TokenClassification, QuestionAnswering, MultipleChoice}: BERT's encoder with BigBird
attention + the heads of models.common.task_heads.

Sequence classification reads [CLS] through RoBERTa's head layout with `hidden_act`;
question answering has its own head (a Transformer feed-forward block before
`qa_outputs`) and takes the question to end at the first [SEP]: its tokens get token
type 0 and the rest 1 when no `token_type_ids` are given, and they (but [CLS]) cannot
be the answer (their logits drop by 1e6).
"""
import flax.linen as nn
import jax
import jax.numpy as jnp

from bertjax.layers import ffn, norms
from bertjax.models.bert import BertModel
from bertjax.models.bert.tasks import KINDS, classifier_dropout
from bertjax.models.bigbird.model import BigBirdConfig
from bertjax.models.common import task_heads as heads
from bertjax.models.roberta.tasks import classification_head

__all__ = ["KINDS", "POOLED", "task_model", "question_mask", "BigBirdForQuestionAnswering"]

POOLED = ("ForSequenceClassification", "ForTokenClassification", "ForMultipleChoice")


def question_mask(input_ids: jax.Array, sep_token_id: int,
                  question_lengths: jax.Array | None = None) -> jax.Array:
  """[B, L] 1 on the question: the tokens up to and including the first [SEP] (or the
  first `question_lengths` [B] / [B, 1] tokens)."""
  if question_lengths is None:
    question_lengths = jnp.argmax(input_ids == sep_token_id, axis=-1) + 1
  lengths = jnp.reshape(question_lengths, (-1, 1))
  return (jnp.arange(input_ids.shape[-1])[None] < lengths).astype(jnp.int32)


class QuestionAnsweringHead(nn.Module):
  """dropout -> feed-forward block -> LayerNorm(+ the encoder output) -> start / end."""
  config: BigBirdConfig

  @nn.compact
  def __call__(self, hidden: jax.Array, *, deterministic: bool = True) -> jax.Array:
    cfg = self.config
    hidden = hidden.astype(jnp.float32)
    x = nn.Dropout(cfg.hidden_dropout)(hidden, deterministic=deterministic)
    x = ffn.MlpBlock(cfg.intermediate_size, cfg.hidden_act, cfg.hidden_dropout,
                     init_std=cfg.initializer_range, name="mlp")(x, deterministic=deterministic)
    x = norms.LayerNorm(cfg.layer_norm_eps, name="mlp_norm")(x + hidden)
    return heads.dense_layer(2, cfg.initializer_range, "out")(x)


class BigBirdForQuestionAnswering(heads.SpanExtractor):
  """Takes `question_lengths` [B] or [B, 1] too (default: up to the first [SEP])."""

  def prepare(self, inputs: dict) -> dict:
    inputs = dict(inputs)
    question = question_mask(inputs["input_ids"], self.encoder.config.sep_token_id,
                             inputs.pop("question_lengths", None))
    if inputs.get("token_type_ids") is None:
      inputs["token_type_ids"] = 1 - question
    return inputs

  def span_logits(self, hidden: jax.Array, inputs: dict, deterministic: bool) -> jax.Array:
    logits = QuestionAnsweringHead(self.encoder.config, name="head")(
        hidden, deterministic=deterministic)
    question = question_mask(inputs["input_ids"], self.encoder.config.sep_token_id,
                             inputs.get("question_lengths"))
    question = question.at[:, 0].set(0)  # [CLS] stays: the null answer of SQuAD 2.0
    return logits - question[..., None] * 1e6


def task_model(kind: str, config: BigBirdConfig) -> nn.Module:
  """transformers' BigBird<kind>."""
  return heads.build(kind, BertModel(config, add_pooling_layer=kind in POOLED),
                     config.num_labels, config.initializer_range,
                     sequence=classification_head(config, config.hidden_act),
                     choice=dict(pooling="pooler", dropout_rate=config.hidden_dropout),
                     token_dropout=classifier_dropout(config),
                     modules={"ForQuestionAnswering": BigBirdForQuestionAnswering})
