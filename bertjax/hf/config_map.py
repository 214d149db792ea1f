"""How a family's config.json and its config dataclass correspond, declared once and read
both ways: `ConfigMap.read` (config.json -> our fields) and `ConfigMap.write` (our config ->
config.json). `Family.config_from_hf` / `config_to_hf` use the family's `config_map`.
"""
import dataclasses
from typing import Any, Callable, Mapping

from bertjax.hf import tasks

_UNSET = object()


@dataclasses.dataclass(frozen=True)
class Field:
  """config.json's key `hf` <-> our config's field `ours`.

  to_hf / from_hf: convert the value where its form differs (e.g. a list <-> a tuple).
  default: what a config.json without the key means (transformers' default, in config.json's
    form), where that is not our field's default.
  read / written: a field read only (config.json's `dtype`), or written only (a key
    transformers wants that repeats another field, e.g. XLNet's d_head).
  omit_none: leave the key out of config.json when our value is None.
  """
  hf: str
  ours: str
  to_hf: Callable[[Any], Any] | None = None
  from_hf: Callable[[Any], Any] | None = None
  default: Any = _UNSET
  read: bool = True
  written: bool = True
  omit_none: bool = False


def same(*names: str) -> tuple[Field, ...]:
  """Fields whose name is the same on both sides."""
  return tuple(Field(name, name) for name in names)


# transformers (>= 4.56) saves the weights' dtype as `dtype`; the encoder families have always
# read it as their compute dtype (GPT, T5 and BART do not). It is not written back.
COMPUTE_DTYPE = Field("dtype", "dtype", written=False)


@dataclasses.dataclass(frozen=True)
class ConfigMap:
  """A family's config.json <-> config.

  model: the family's name in errors (e.g. 'ALBERT').
  fields: the keys that carry our config's fields.
  constants: keys our modules support at one value only: written so, and a config.json
    holding another value is refused (a config.json without the key means that value).
  checked: like constants, but not written (transformers' default is the supported value).
  hf_only: keys written with a fixed value and not read (transformers' settings our config
    has no field for, e.g. tie_word_embeddings).
  reasons: key -> why only one value is supported, added to the refusal.
  labels: config.json carries the task classes' labels and problem_type
    (`tasks.label_values` / `tasks.label_config`).
  """
  model: str
  fields: tuple[Field, ...]
  constants: Mapping[str, Any] = dataclasses.field(default_factory=dict)
  checked: Mapping[str, Any] = dataclasses.field(default_factory=dict)
  hf_only: Mapping[str, Any] = dataclasses.field(default_factory=dict)
  reasons: Mapping[str, str] = dataclasses.field(default_factory=dict)
  labels: bool = True

  def read(self, hf_config: Mapping[str, Any]) -> dict[str, Any]:
    """Our config's fields from config.json's contents (ValueError on a refused value)."""
    self.check(hf_config)
    values = {}
    for field in self.fields:
      if not field.read:
        continue
      if field.hf in hf_config:
        value = hf_config[field.hf]
      elif field.default is not _UNSET:
        value = field.default
      else:
        continue
      values[field.ours] = field.from_hf(value) if field.from_hf else value
    if self.labels:
      values.update(tasks.label_values(hf_config))
    return values

  def check(self, hf_config: Mapping[str, Any]) -> None:
    for key, supported in {**self.constants, **self.checked}.items():
      if key in hf_config and hf_config[key] != supported:
        reason = f": {self.reasons[key]}" if key in self.reasons else ""
        raise ValueError(f"config.json: {key}={hf_config[key]!r} is not supported for "
                         f"{self.model}; only {supported!r} is{reason}.")

  def write(self, config: Any) -> dict[str, Any]:
    """config.json's contents for `config` (without model_type and architectures)."""
    hf = {}
    for field in self.fields:
      if not field.written:
        continue
      value = getattr(config, field.ours)
      if value is None and field.omit_none:
        continue
      hf[field.hf] = field.to_hf(value) if field.to_hf else value
    hf.update(self.constants)
    hf.update(self.hf_only)
    if self.labels:
      hf.update(tasks.label_config(config))
    return hf
