"""The fields every Transformer encoder family shares, with BERT's defaults.

BertConfig (and through it ALBERT, RoBERTa, BigBird, DistilBERT, SpanBERT, Longformer),
DebertaConfig and ElectraConfig inherit EncoderConfig: a family adds its own fields and
re-declares only the defaults that differ (a re-declared field keeps its place, so the
shared fields always come first, in this order).
"""
import dataclasses
from typing import ClassVar, Self

from bertjax.hf.tasks import PROBLEM_TYPES
from bertjax.layers import activations, attention
from bertjax.models.common import positions


class AttentionAndLabels:
  """What a config with `hidden_size`, `num_heads` and `labels` derives from them."""

  @property
  def head_dim(self) -> int:
    return self.hidden_size // self.num_heads

  @property
  def num_labels(self) -> int:
    return len(self.labels)

  def replace(self, **changes) -> Self:
    return dataclasses.replace(self, **changes)


@dataclasses.dataclass(frozen=True)
class EncoderConfig(AttentionAndLabels):
  vocab_size: int = 30522
  hidden_size: int = 768
  num_layers: int = 12
  num_heads: int = 12
  intermediate_size: int = 3072
  hidden_act: str = "gelu"
  hidden_dropout: float = 0.1
  attention_dropout: float = 0.1
  max_position_embeddings: int = 512
  type_vocab_size: int = 2
  layer_norm_eps: float = 1e-12
  initializer_range: float = 0.02
  pad_token_id: int = 0
  dtype: str = "float32"  # compute dtype; parameters are always float32
  remat: bool = False
  scan_unroll: int = 0  # layers per loop iteration; 0: by backend (layers_per_iteration)
  # Self-attention kernel (bertjax.layers.attention.IMPLEMENTATIONS): 'xla' (explicit, any
  # backend) or 'cudnn' (fused, NVIDIA GPUs, no attention dropout). Dense self-attention only:
  # DeBERTa's disentangled and the long-attention patterns refuse 'cudnn'.
  attention_implementation: str = "xla"
  # Encoder variants (experiments/scale), for the families whose modules build them
  # (ENCODER_VARIANTS): 'absolute' or 'rotary' positions (models.common.positions), and
  # layer norms before each sublayer plus one after the stack (pre-LN) instead of after
  # each residual sum (BERT's post-LN).
  position_embedding: str = "absolute"
  rotary_base: float = 10000.0
  pre_norm: bool = False
  # Task classes (transformers' id2label, problem_type, classifier_dropout): the labels'
  # names in id order, how a classifier's outputs are read, the head's dropout (None:
  # hidden_dropout). Bare encoders ignore them.
  labels: tuple[str, ...] = ("LABEL_0", "LABEL_1")
  problem_type: str | None = None
  classifier_dropout: float | None = None

  ENCODER_VARIANTS: ClassVar[bool] = False  # whether the family builds the variants above
  # Whether they are the family's own architecture, which its transformers classes run too
  # (ModernBERT), so that to_hf exports them.
  EXPORTS_VARIANTS: ClassVar[bool] = False

  def __post_init__(self):
    positions.check(self)
    if not self.ENCODER_VARIANTS and (positions.is_rotary(self) or self.pre_norm):
      raise ValueError(f"{type(self).__name__}: this family has absolute positions and post-LN "
                       "only; position_embedding='rotary' and pre_norm=True are BERT's and "
                       "ELECTRA's research variants.")
    if self.hidden_size % self.num_heads:
      raise ValueError(f"{type(self).__name__}: hidden_size={self.hidden_size} is not a multiple "
                       f"of num_heads={self.num_heads}; pick sizes where it divides evenly.")
    activations.get_activation(self.hidden_act)  # fails early on an unknown name
    attention.check_implementation(self.attention_implementation)
    check_labels(self)

  @property
  def max_positions(self) -> int | None:
    """How many tokens one input row may hold: the rows of the absolute position table
    (a family whose table starts at an offset, or that has none, says so); None for
    rotary positions, which have no table."""
    return None if positions.is_rotary(self) else self.max_position_embeddings


def check_labels(config) -> None:
  """A config's task fields (`labels`, `problem_type`) are usable (a list of labels becomes
  a tuple, so the frozen config stays hashable)."""
  name = type(config).__name__
  if isinstance(config.labels, list):  # e.g. from gin or JSON
    object.__setattr__(config, "labels", tuple(config.labels))
  if not config.labels or not isinstance(config.labels, tuple):
    raise ValueError(f"{name}: labels={config.labels!r}; give a non-empty tuple of label names "
                     "in id order (one name for a regression output).")
  if config.problem_type not in PROBLEM_TYPES:
    raise ValueError(f"{name}: problem_type={config.problem_type!r}; use one of {PROBLEM_TYPES}.")


def max_positions(config) -> int | None:
  """The longest input row any model config allows (its `max_positions`, else its
  max_position_embeddings: GPT, BART), or None when its positions are relative only and
  no table can be run past (T5, XLNet, DeBERTa without absolute positions)."""
  if hasattr(config, "max_positions"):
    return config.max_positions
  return getattr(config, "max_position_embeddings", None) or None
