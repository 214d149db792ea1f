"""Generation settings: transformers' `generate` arguments, defaults from the model config."""
import dataclasses
from typing import Any, Optional, Union


@dataclasses.dataclass(frozen=True)
class GenerationConfig:
  """transformers' `generate` arguments of the same names (and defaults, top_k included)."""
  max_new_tokens: int = 20
  num_beams: int = 1
  do_sample: bool = False
  temperature: float = 1.0
  top_k: int = 50
  top_p: float = 1.0
  length_penalty: float = 1.0
  early_stopping: Union[bool, str] = False
  num_return_sequences: int = 1
  eos_token_id: Optional[int] = None
  pad_token_id: Optional[int] = None
  decoder_start_token_id: Optional[int] = None
  forced_bos_token_id: Optional[int] = None
  forced_eos_token_id: Optional[int] = None
  use_cache: bool = True
  # bertjax only: False recomputes encoder-decoders' cross-attention keys/values from the
  # encoder output at every step (the self-attention cache alone; a benchmark baseline).
  cache_cross_attention: bool = True

  def __post_init__(self):
    if self.max_new_tokens < 1:
      raise ValueError(f"max_new_tokens={self.max_new_tokens}; expected at least 1.")
    if self.num_beams < 1 or not 1 <= self.num_return_sequences <= self.num_beams:
      raise ValueError(f"num_beams={self.num_beams}, num_return_sequences="
                       f"{self.num_return_sequences}: expected 1 <= num_return_sequences <= "
                       "num_beams.")
    if self.early_stopping not in (True, False, "never"):
      raise ValueError(f"early_stopping={self.early_stopping!r}; expected True, False or 'never'.")


_FROM_MODEL_CONFIG = ("eos_token_id", "pad_token_id", "decoder_start_token_id",
                      "forced_bos_token_id", "forced_eos_token_id")


def generation_config(model_config: Any = None, **kwargs) -> GenerationConfig:
  """Settings from `kwargs`, token ids not given there taken from the model's config."""
  names = {f.name for f in dataclasses.fields(GenerationConfig)}
  unknown = sorted(set(kwargs) - names - {"max_length"})
  if unknown:
    raise ValueError(f"Unknown generate() arguments {unknown}; supported: {sorted(names)} "
                     "and max_length.")
  for name in _FROM_MODEL_CONFIG:
    if kwargs.get(name) is None and getattr(model_config, name, None) is not None:
      kwargs[name] = getattr(model_config, name)
  kwargs.pop("max_length", None)
  return GenerationConfig(**kwargs)
