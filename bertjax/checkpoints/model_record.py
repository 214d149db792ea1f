"""The model a training run was started with, recorded in its model_dir and compared
whenever the run resumes.

`model_config.json` holds the module's architecture and every field of its config
dataclass, flattened to dotted names (`config.hidden_size`; a distillation pair's
`student.config.num_layers`). A resume whose model differs is refused before any compute,
naming the fields, unless every differing field is named in `allowed` (gin:
`Trainer.allow_config_change`), e.g. a new dropout rate; such a change is recorded with
the step it took effect at, and the new model becomes the one compared next time.
Training knobs outside the model config (sequence length, batch size, steps) are not
part of the record.
"""
import dataclasses
import json
import os
import re
from typing import Any, Iterable

import flax.linen as nn

from bertjax import configurables
from bertjax.checkpoints.integrity import CheckpointError

RECORD_FILE = "model_config.json"
# Fields that never change what a model computes (how the layer loop is compiled).
NEUTRAL_FIELDS = ("remat", "scan_unroll")


class ModelChangedError(CheckpointError):
  """The gin model differs from the one the run's checkpoints were trained with."""


def describe(module: Any) -> dict[str, Any]:
  """{dotted field name: JSON value} of a linen module (or any dataclass), recursively."""
  flat: dict[str, Any] = {}

  def visit(value: Any, prefix: str) -> None:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
      kind = "architecture" if isinstance(value, nn.Module) else "type"
      flat[prefix + kind] = type(value).__name__
      for field in dataclasses.fields(value):
        if field.name not in ("parent", "name") + NEUTRAL_FIELDS:
          visit(getattr(value, field.name), f"{prefix}{field.name}.")
    else:
      flat[prefix[:-1]] = _plain(value)

  visit(module, "")
  return flat


def _plain(value: Any) -> Any:
  """A JSON value that compares equal exactly when `value` means the same thing."""
  if value is None or isinstance(value, (bool, int, float, str)):
    return value
  if isinstance(value, (list, tuple)):
    return [_plain(v) for v in value]
  if isinstance(value, dict):
    return {str(k): _plain(v) for k, v in sorted(value.items(), key=lambda kv: str(kv[0]))}
  if callable(value) and hasattr(value, "__qualname__"):
    return f"{getattr(value, '__module__', '')}.{value.__qualname__}"
  return re.sub(r" at 0x[0-9a-f]+", "", repr(value))


def record_path(model_dir: str) -> str:
  return os.path.join(model_dir, RECORD_FILE)


def read(model_dir: str) -> dict[str, Any] | None:
  path = record_path(model_dir)
  if not os.path.isfile(path):
    return None
  try:
    with open(path) as f:
      record = json.load(f)
    if not isinstance(record.get("model"), dict):
      raise ValueError("no 'model' entry")
    record["model"] = configurables.upgrade_flat_fields(record["model"])  # written before a rename
    return record
  except (ValueError, AttributeError) as e:
    raise CheckpointError(f"{path} is unreadable ({e}); it records the model this run was "
                          f"trained with. Restore it, or give a new --model_dir.") from None


def changes(model_dir: str, module: Any, allowed: Iterable[str] = ()) -> dict[str, list]:
  """{field: [recorded, now]} of the allowed differences between the recorded model and
  `module` (empty when nothing was recorded); raises ModelChangedError naming the others."""
  record = read(model_dir)
  if record is None:
    return {}
  before, now = record["model"], describe(module)
  differ = {k: [before.get(k), now.get(k)] for k in sorted(set(before) | set(now))
            if before.get(k) != now.get(k)}
  allowed = tuple(allowed)
  refused = [k for k in differ if not any(k == a or k.endswith("." + a) for a in allowed)]
  if refused:
    listed = ", ".join(f"{k} {differ[k][0]!r} -> {differ[k][1]!r}" for k in refused)
    names = tuple(k.rsplit(".", 1)[-1] for k in refused)
    raise ModelChangedError(
        f"The gin model differs from the one the checkpoints in {model_dir} were trained with "
        f"({record_path(model_dir)}): {listed}. Give a new --model_dir to train this model, "
        f"or, if the change is intended, bind Trainer.allow_config_change = {names!r}.")
  return differ


def write(model_dir: str, module: Any, step: int | None = None,
          changed: dict[str, list] | None = None) -> None:
  """Records `module` as the run's model; `changed` (an allowed change at `step`) is
  added to the record's history."""
  record = read(model_dir) if changed else None
  history = list(record.get("changes", [])) if record else []
  if changed:
    history.append({"step": step, "fields": changed})
  path = record_path(model_dir)
  partial = path + ".partial"
  with open(partial, "w") as f:
    json.dump({"model": describe(module), "changes": history}, f, indent=1, sort_keys=True)
  os.replace(partial, path)
