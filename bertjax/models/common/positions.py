"""Where an encoder's word order comes from: a learned table of absolute positions (BERT,
RoBERTa, ELECTRA, GPT) or rotary attention (RoFormer, ModernBERT: queries and keys rotated
by position, bertjax.layers.rotary, no table and no length limit).

A config chooses with `position_embedding` ('absolute' | 'rotary') and `rotary_base`; the
modules ask this file what to build. Rotary BERT, ELECTRA and GPT models are research
variants (experiments/scale): transformers' classes for those families have no rotary
positions, so they do not export.
"""
POSITION_EMBEDDINGS = ("absolute", "rotary")


def is_rotary(config) -> bool:
  return getattr(config, "position_embedding", "absolute") == "rotary"


def check(config) -> None:
  """Refuses an unknown `position_embedding` or a rotary base that is not positive."""
  name = type(config).__name__
  if config.position_embedding not in POSITION_EMBEDDINGS:
    raise ValueError(f"{name}: position_embedding={config.position_embedding!r}; use one of "
                     f"{POSITION_EMBEDDINGS}.")
  if is_rotary(config) and config.rotary_base <= 0:
    raise ValueError(f"{name}: rotary_base={config.rotary_base} must be > 0.")


def table_size(config) -> int:
  """Rows of the absolute position table (0: none, the positions are rotary)."""
  return 0 if is_rotary(config) else config.max_position_embeddings


def rotary_base(config) -> float:
  """The stack's rotary base (0.0: no rotary attention)."""
  return config.rotary_base if is_rotary(config) else 0.0


def stack_inputs(config, position_ids) -> dict:
  """What the Transformer stack needs besides the hidden states: rotary attention reads the
  positions (restarting per packed example when the batch gives them)."""
  return {"positions": position_ids} if is_rotary(config) else {}
