"""Knowledge distillation losses (Hinton et al., 2015), DistilBERT's triple loss and
Tang et al. (2019)'s logit regression.

Soft targets at temperature T: the student matches softmax(teacher / T) with
softmax(student / T). The gradient of that term w.r.t. the student's logits is
(p_s - p_t) / T, so it is scaled by T^2 to keep its size independent of T (and
comparable to a hard-label term) - Hinton et al., sec. 2. We use
KL(p_t || p_s) rather than the soft cross-entropy: same gradient, but the value is
0 when the student matches, so the logged loss means something.

Both objectives read a StudentTeacher pair's outputs (bertjax.models.common.distillation):
the student's `logits` / `last_hidden_state` and the teacher's `teacher_logits` /
`teacher_last_hidden_state`. Logits may be token-level [B, L, V] (MLM distillation)
or per-example [B, C] (a classifier distilled on GLUE); weights have the logits'
leading shape. `LogitRegression` instead reads the teacher's logits from the batch
(`teacher_logits`, scored once before training: bertjax.distill).
"""
import dataclasses

import gin
import jax
import jax.numpy as jnp

from bertjax import batch as contract
from bertjax.objectives import base

Array = base.Array


def soft_target_loss(student_logits: Array, teacher_logits: Array,
                     temperature: float = 1.0) -> Array:
  """T^2 * KL(softmax(teacher/T) || softmax(student/T)) per position (last axis reduced)."""
  t = jax.nn.log_softmax(teacher_logits.astype(jnp.float32) / temperature, axis=-1)
  s = jax.nn.log_softmax(student_logits.astype(jnp.float32) / temperature, axis=-1)
  return temperature ** 2 * jnp.sum(jnp.exp(t) * (t - s), axis=-1)


def hard_target_loss(student_logits: Array, teacher_logits: Array) -> Array:
  """Cross-entropy against the teacher's argmax ("hard" distillation) per position."""
  targets = jnp.argmax(teacher_logits, axis=-1)
  log_probs = jax.nn.log_softmax(student_logits.astype(jnp.float32), axis=-1)
  return -jnp.take_along_axis(log_probs, targets[..., None], -1)[..., 0]


def cosine_loss(student_hidden: Array, teacher_hidden: Array, eps: float = 1e-8) -> Array:
  """1 - cos(student, teacher) per position (torch's CosineEmbeddingLoss with target 1)."""
  s = student_hidden.astype(jnp.float32)
  t = teacher_hidden.astype(jnp.float32)
  cos = jnp.sum(s * t, -1) / jnp.maximum(jnp.linalg.norm(s, axis=-1) * jnp.linalg.norm(t, axis=-1),
                                         eps)
  return 1.0 - cos


def squared_error(student_logits: Array, teacher_logits: Array) -> Array:
  """||z_teacher - z_student||^2 per example (last axis reduced): Tang et al.'s L_distill."""
  diff = student_logits.astype(jnp.float32) - teacher_logits.astype(jnp.float32)
  return jnp.sum(diff * diff, axis=-1)


def _weighted(values: Array, weights: Array) -> tuple[Array, Array]:
  weights = weights.astype(jnp.float32)
  return jnp.sum(values * weights), jnp.sum(weights)


def _agreement(student_logits: Array, teacher_logits: Array, weights: Array) -> tuple[Array, Array]:
  same = (jnp.argmax(student_logits, -1) == jnp.argmax(teacher_logits, -1)).astype(jnp.float32)
  return _weighted(same, weights)


@gin.configurable
@dataclasses.dataclass(frozen=True)
class Distillation:
  """Hinton distillation: alpha * T^2 KL(teacher_T || student_T) + (1 - alpha) * CE(labels).

  label_key: hard labels in the batch (`mlm_targets`, or a classification's `labels`);
    None trains on the teacher alone (alpha is then 1).
  weight_key: per-position weights (`mlm_weights`, `attention_mask`); None weighs
    every position of the logits' leading shape equally.
  hard: replace the soft term by cross-entropy against the teacher's argmax.
  """
  alpha: float = 0.5
  temperature: float = 2.0
  hard: bool = False
  label_key: str | None = None
  weight_key: str | None = "attention_mask"
  student_logits_key: str = "logits"
  teacher_logits_key: str = "teacher_logits"
  name: str = "distill"
  rng_names: tuple[str, ...] = ()

  def __post_init__(self):
    keys = [k for k in (self.label_key, self.weight_key) if k is not None]
    contract.check(keys, "Distillation.label_key / weight_key")

  def model_inputs(self, batch):
    return contract.select(batch, contract.ENCODER_INPUTS)

  def __call__(self, outputs, batch):
    student, teacher = outputs[self.student_logits_key], outputs[self.teacher_logits_key]
    weights = (jnp.ones(student.shape[:-1], jnp.float32) if self.weight_key is None
               else contract.require(batch, (self.weight_key,), "Distillation")[self.weight_key])
    per_position = (hard_target_loss(student, teacher) if self.hard
                    else soft_target_loss(student, teacher, self.temperature))
    soft_sum, count = _weighted(per_position, weights)
    metrics = {f"{self.name}_soft_loss": (soft_sum, count),
               f"{self.name}_teacher_agreement": _agreement(student, teacher, weights)}
    loss = base.safe_mean(soft_sum, count)
    if self.label_key is not None:
      labels = contract.require(batch, (self.label_key,), "Distillation")[self.label_key]
      label_sum, correct, label_count = base.weighted_cross_entropy(student, labels, weights)
      metrics[f"{self.name}_label_loss"] = (label_sum, label_count)
      metrics[f"{self.name}_accuracy"] = (correct, label_count)
      loss = self.alpha * loss + (1.0 - self.alpha) * base.safe_mean(label_sum, label_count)
    return loss, metrics


@gin.configurable
@dataclasses.dataclass(frozen=True)
class DistilBertLoss:
  """DistilBERT's triple loss: alpha_ce L_ce + alpha_mlm L_mlm + alpha_cos L_cos.

  L_ce: soft targets at `temperature` (T^2-scaled KL) over every real token
    (`attention_mask`), or over the masked ones only with `ce_on_masked_only`;
  L_mlm: the student's masked-LM cross-entropy (`mlm_targets`, `mlm_weights`);
  L_cos: 1 - cosine between student and teacher last hidden states, real tokens.
  Defaults are the paper's run (alpha_ce 5, alpha_mlm 2, alpha_cos 1, T = 2).
  """
  alpha_ce: float = 5.0
  alpha_mlm: float = 2.0
  alpha_cos: float = 1.0
  temperature: float = 2.0
  ce_on_masked_only: bool = False
  rng_names: tuple[str, ...] = ()

  def model_inputs(self, batch):
    return contract.select(batch, contract.ENCODER_INPUTS)

  def __call__(self, outputs, batch):
    student, teacher = outputs["logits"], outputs["teacher_logits"]
    mlm = contract.require(batch, contract.MLM, "DistilBertLoss")
    real = batch.get("attention_mask")
    real = jnp.ones(student.shape[:-1], jnp.float32) if real is None else real
    ce_weights = mlm["mlm_weights"] if self.ce_on_masked_only else real
    ce_sum, ce_count = _weighted(soft_target_loss(student, teacher, self.temperature), ce_weights)
    mlm_sum, correct, mlm_count = base.weighted_cross_entropy(
        student, mlm["mlm_targets"], mlm["mlm_weights"])
    cos_sum, cos_count = _weighted(
        cosine_loss(outputs["last_hidden_state"], outputs["teacher_last_hidden_state"]), real)
    loss = (self.alpha_ce * base.safe_mean(ce_sum, ce_count)
            + self.alpha_mlm * base.safe_mean(mlm_sum, mlm_count)
            + self.alpha_cos * base.safe_mean(cos_sum, cos_count))
    metrics = {"distill_ce_loss": (ce_sum, ce_count), "mlm_loss": (mlm_sum, mlm_count),
               "mlm_accuracy": (correct, mlm_count), "cos_loss": (cos_sum, cos_count),
               "teacher_agreement": _agreement(student, teacher, ce_weights)}
    return loss, metrics


@gin.configurable
@dataclasses.dataclass(frozen=True)
class LogitRegression:
  """Tang et al. (2019): L = a * CE(labels) + (1 - a) * ||z_teacher - z_student||^2.

  The teacher's logits are a batch feature (`teacher_logits` [B, C]); the squared error
  is summed over classes and averaged over the rows that count (`weights`, default all).
  label_weight (the paper's alpha): 0 distils from the teacher alone (the paper's
  choice), 1 trains on the labels alone (the no-teacher baseline; `teacher_logits` are
  then not read).
  """
  label_weight: float = 0.0
  rng_names: tuple[str, ...] = ()

  def __post_init__(self):
    if not 0.0 <= self.label_weight <= 1.0:
      raise ValueError(f"LogitRegression.label_weight = {self.label_weight}: must be in [0, 1].")

  def model_inputs(self, batch):
    return contract.select(batch, ("input_ids", "attention_mask"))

  def __call__(self, outputs, batch):
    student = outputs["logits"]
    weights = batch.get("weights")
    weights = jnp.ones(student.shape[:1], jnp.float32) if weights is None else weights
    loss, metrics = jnp.zeros((), jnp.float32), {}
    if self.label_weight < 1.0:
      teacher = contract.require(batch, ("teacher_logits",), "LogitRegression",
                                 "bertjax.distill.student")["teacher_logits"]
      mse_sum, count = _weighted(squared_error(student, teacher), weights)
      metrics["logit_mse"] = (mse_sum, count)
      metrics["teacher_agreement"] = _agreement(student, teacher, weights)
      loss = (1.0 - self.label_weight) * base.safe_mean(mse_sum, count)
    if self.label_weight > 0.0 or "labels" in batch:
      labels = contract.require(batch, ("labels",), "LogitRegression")["labels"]
      ce_sum, correct, count = base.weighted_cross_entropy(student, labels, weights)
      metrics["label_loss"] = (ce_sum, count)
      metrics["accuracy"] = (correct, count)
      if self.label_weight > 0.0:
        loss = loss + self.label_weight * base.safe_mean(ce_sum, count)
    return loss, metrics
