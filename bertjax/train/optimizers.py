"""Optimizers and learning-rate schedules of the BERT-family papers, built on Optax.

* AdamW  - BERT (b2 0.999, eps 1e-6, wd 0.01, linear warmup then linear decay);
           RoBERTa (b2 0.98, eps 1e-6).
* LAMB   - large-batch BERT (You et al., 2020) and ALBERT: Adam direction, then a
           per-layer trust ratio; bias / LayerNorm excluded from decay and adaptation.
* Adafactor - T5, with the inverse-square-root schedule 1/sqrt(max(step, warmup)).

Weight decay never touches biases or norm scales: they are selected by parameter
path (`DEFAULT_NO_DECAY`), which works the same for `nn.scan`-stacked layers where a
LayerNorm scale is 2-D. Frozen parameters (a teacher in distillation, ELECTRA's
generator in a second stage) are chosen by path regex and get zero updates.
"""
import re
from typing import Any, Callable, Sequence

import gin
import jax
import jax.numpy as jnp
import optax

Schedule = Callable[[jax.Array], jax.Array]

# Leaf names of biases and of LayerNorm / RMSNorm scales (flax calls both `scale`).
DEFAULT_NO_DECAY = (r"(^|/)bias$", r"(^|/)scale$")


# ----------------------------------------------------------------------------- schedules
@gin.configurable
def warmup_linear_decay(total_steps: int, peak_value: float = 1e-4, warmup_steps: int = 10_000,
                        end_value: float = 0.0) -> Schedule:
  """BERT: linear warmup from 0 to `peak_value`, then linear decay to `end_value`."""
  warmup_steps = min(warmup_steps, total_steps)
  return optax.join_schedules([
      optax.linear_schedule(0.0, peak_value, warmup_steps),
      optax.linear_schedule(peak_value, end_value, max(total_steps - warmup_steps, 1)),
  ], [warmup_steps])


@gin.configurable
def warmup_cosine_decay(total_steps: int, peak_value: float = 1e-4, warmup_steps: int = 10_000,
                        end_value: float = 0.0) -> Schedule:
  """Linear warmup then cosine decay (common in later fine-tuning recipes)."""
  return optax.warmup_cosine_decay_schedule(0.0, peak_value, min(warmup_steps, total_steps),
                                            max(total_steps, 1), end_value)


@gin.configurable
def inverse_sqrt(total_steps: int, warmup_steps: int = 10_000, scale: float = 1.0) -> Schedule:
  """T5: `scale / sqrt(max(step, warmup_steps))` - constant 0.01 for the first 10k steps.

  `total_steps` is accepted (and ignored) so every schedule has the same signature.
  """
  del total_steps
  def schedule(step):
    return scale * jax.lax.rsqrt(jnp.maximum(jnp.asarray(step, jnp.float32), warmup_steps))
  return schedule


@gin.configurable
def constant(total_steps: int, value: float = 1e-4) -> Schedule:
  del total_steps
  return optax.constant_schedule(value)


# ----------------------------------------------------------------------------- masks
def path_str(path: tuple) -> str:
  """'bert/encoder/layers/attention/query/kernel' for a jax key path."""
  parts = []
  for key in path:
    for attr in ("key", "name", "idx"):
      if hasattr(key, attr):
        parts.append(str(getattr(key, attr)))
        break
    else:
      parts.append(str(key))
  return "/".join(parts)


def path_mask(params: Any, patterns: Sequence[str]) -> Any:
  """A bool pytree: True where the parameter's path matches one of `patterns`."""
  compiled = [re.compile(p) for p in patterns]
  return jax.tree_util.tree_map_with_path(
      lambda path, _: any(c.search(path_str(path)) for c in compiled), params)


def decay_mask(params: Any, no_decay: Sequence[str] = DEFAULT_NO_DECAY) -> Any:
  """True where weight decay applies: everything but biases and norm scales."""
  return jax.tree.map(lambda excluded: not excluded, path_mask(params, no_decay))


# ----------------------------------------------------------------------------- optimizers
@gin.configurable
def adamw(learning_rate: Schedule, b1: float = 0.9, b2: float = 0.999, eps: float = 1e-6,
          weight_decay: float = 0.01,
          no_decay: Sequence[str] = DEFAULT_NO_DECAY) -> optax.GradientTransformation:
  """Decoupled weight decay Adam (BERT defaults; RoBERTa sets b2=0.98)."""
  return optax.adamw(learning_rate, b1=b1, b2=b2, eps=eps, weight_decay=weight_decay,
                     mask=lambda p: decay_mask(p, no_decay))


@gin.configurable
def lamb(learning_rate: Schedule, b1: float = 0.9, b2: float = 0.999, eps: float = 1e-6,
         weight_decay: float = 0.01,
         no_decay: Sequence[str] = DEFAULT_NO_DECAY) -> optax.GradientTransformation:
  """LAMB as in the reference implementation: the excluded parameters get neither
  weight decay nor the layer-wise trust ratio (plain Adam steps)."""
  mask = lambda p: decay_mask(p, no_decay)
  return optax.chain(
      optax.scale_by_adam(b1=b1, b2=b2, eps=eps),
      optax.add_decayed_weights(weight_decay, mask),
      optax.masked(optax.scale_by_trust_ratio(), mask),
      optax.scale_by_learning_rate(learning_rate),
  )


@gin.configurable
def adafactor(learning_rate: Schedule, decay_rate: float = 0.8,
              clipping_threshold: float | None = 1.0, multiply_by_parameter_scale: bool = True,
              min_dim_size_to_factor: int = 128, momentum: float | None = None,
              weight_decay: float | None = None) -> optax.GradientTransformation:
  """T5's Adafactor: factored second moments, update clipping, relative step size."""
  return optax.adafactor(learning_rate, min_dim_size_to_factor=min_dim_size_to_factor,
                         decay_rate=decay_rate, clipping_threshold=clipping_threshold,
                         multiply_by_parameter_scale=multiply_by_parameter_scale,
                         momentum=momentum, weight_decay_rate=weight_decay,
                         weight_decay_mask=decay_mask if weight_decay else None)


@gin.configurable
def sgd(learning_rate: Schedule, momentum: float | None = None) -> optax.GradientTransformation:
  return optax.sgd(learning_rate, momentum=momentum)


def clip_by_global_norm(max_norm: float) -> optax.GradientTransformation:
  """Scales the gradients by min(1, max_norm / their global norm): optax's
  `clip_by_global_norm` with the same state and results (to rounding), written as one
  multiplication by a scalar. XLA fuses that into the optimizer's own pass over every
  parameter; optax's select between the clipped and the raw gradient it wrote out as a
  whole second copy of the gradients: the AdamW update of all-MiniLM-L6-v2's 22.7M
  parameters took 48.7 ms with it and takes 26.5 ms with this on 2 CPU cores, a whole step
  3% less (benchmarks/results/update_rates.md). A NaN or Inf norm gives NaN or zero
  gradients, as optax's does."""

  def update(updates, state, params=None):
    del params
    scale = jnp.minimum(1.0, max_norm / optax.global_norm(updates))
    return jax.tree.map(lambda g: g * scale.astype(g.dtype), updates), state

  return optax.GradientTransformation(lambda params: optax.EmptyState(), update)


@gin.configurable
def make_optimizer(total_steps: int, optimizer: Callable[..., optax.GradientTransformation] = adamw,
                   schedule: Callable[..., Schedule] = warmup_linear_decay,
                   clip_grad_norm: float | None = 1.0,
                   frozen: Sequence[str] = ()) -> tuple[optax.GradientTransformation, Schedule]:
  """The full update rule: clip by global norm -> optimizer(schedule) (-> freeze).

  Args:
    total_steps: training length, for schedules that decay to an end point.
    optimizer: one of the factories above (gin: `make_optimizer.optimizer = @lamb`).
    schedule: a schedule factory taking `total_steps` (gin: `@inverse_sqrt`).
    clip_grad_norm: global-norm clipping threshold (BERT: 1.0); None disables it.
    frozen: path regexes of parameters that must not change (zero updates, no
      optimizer state).

  Returns:
    (transformation, schedule) - the schedule is also returned so the trainer can
    log the learning rate at each step.
  """
  lr = schedule(total_steps=total_steps)
  tx = optimizer(learning_rate=lr)
  if clip_grad_norm:
    tx = optax.chain(clip_by_global_norm(clip_grad_norm), tx)
  if frozen:
    labels = lambda p: jax.tree.map(lambda f: "frozen" if f else "trained",
                                    path_mask(p, frozen))
    tx = optax.multi_transform({"trained": tx, "frozen": optax.set_to_zero()}, labels)
  return tx, lr


def adamw_linear(total_steps: int, peak_value: float, warmup_steps: int,
                 weight_decay: float = 0.01, clip_grad_norm: float | None = 1.0,
                 frozen: Sequence[str] = ()) -> tuple[optax.GradientTransformation, Schedule]:
  """BERT's fine-tuning update rule, shared by fine-tuning and SBERT training: AdamW,
  linear warmup to `peak_value` over `warmup_steps` then linear decay to 0, clipping."""
  return make_optimizer(
      total_steps,
      optimizer=lambda learning_rate: adamw(learning_rate, weight_decay=weight_decay),
      schedule=lambda total_steps: warmup_linear_decay(total_steps, peak_value, warmup_steps),
      clip_grad_norm=clip_grad_norm, frozen=frozen)
