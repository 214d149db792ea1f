"""What a model family tells the bridge: configs, modules, and the parameter table."""
import abc
import re
from typing import Any, Mapping, Sequence

import flax.linen as nn
import jax.numpy as jnp

from bertjax.hf import tasks
from bertjax.hf.config_map import ConfigMap
from bertjax.hf.mapping import Rule, linear


class Family(abc.ABC):
  """Base class of the `bertjax/models/<family>/hf.py` adapters. Subclasses fill in the class
  attributes and the abstract `model_rules`; the rest has working defaults.

  config.json: `config_map` (bertjax.hf.config_map.ConfigMap) declares how its keys and our
  config's fields correspond; `config_from_hf` and `config_to_hf` read it both ways. A
  family overrides them only for what a declaration cannot say (a field derived from
  several keys, a check across fields), calling the default for the rest.

  Parameters: `rules` gives a task class (<Prefix>For<Kind>, bertjax.hf.tasks.KINDS) the
  table `task_rules` builds from the hooks below, any other class `model_rules`. Our task
  models keep the encoder under `encoder/` (tasks.ENCODER) and the head under `head/`. The hooks:
    task_encoder_prefix: where transformers' task classes keep the encoder ('bert.').
    encoder_rules(hf, ours, config): the bare encoder's tensors below those two prefixes.
    pooled_kinds: the kinds whose encoder keeps its pooler; pooler_layer: the pooler's
      transformers layer below the prefix ('pooler.dense', ALBERT's bare 'pooler').
    task_heads: kind -> the transformers layers of its head: (hidden dense or None, output);
      a family whose head has more layers overrides `task_head_rules` instead.
  """
  name: str = ""
  model_types: tuple[str, ...] = ()
  # Our config dataclass: how a trained module's family is found (registry.family_for_config).
  config_class: type | None = None
  config_map: ConfigMap | None = None
  # Task classes' tables (see above).
  task_encoder_prefix: str = ""
  pooled_kinds: tuple[str, ...] = ()
  pooler_layer: str = "pooler.dense"
  task_heads: Mapping[str, tuple[str | None, str]] = {}
  # HF architecture name -> names of the reference outputs our module returns for it.
  architectures: Mapping[str, tuple[str, ...]] = {}
  # HF tensors deliberately not loaded (buffers, tied duplicates), as regexes.
  ignored_keys: tuple[str, ...] = ()
  # Our modules (`make_module`): the class of each architecture that is not a task class,
  # and the family's tasks module (bertjax.models.<family>.tasks, with `task_model`).
  modules: Mapping[str, type] = {}
  task_models: Any = None

  def __repr__(self) -> str:
    """The family's name (`open_model(path).family` prints as 'bert')."""
    return self.name

  __str__ = __repr__

  def config_from_hf(self, hf_config: Mapping[str, Any]) -> Any:
    """Our config dataclass from config.json's contents (ValueError on unsupported options)."""
    return self.config_class(**self.config_map.read(hf_config))

  def config_to_hf(self, config: Any, architecture: str) -> dict:
    """config.json contents for `config` (with model_type and architectures)."""
    return {"model_type": self.model_types[0], "architectures": [architecture],
            **self.config_map.write(config)}

  def make_module(self, architecture: str, config: Any) -> nn.Module:
    """Our module implementing the HF `architecture`."""
    kind = tasks.kind_of(architecture)
    if kind:
      return self.task_models.task_model(kind, config)
    return self.modules[architecture](config)

  def rules(self, architecture: str, config: Any) -> Sequence[Rule]:
    """The parameter table for `architecture` (see bertjax.hf.mapping.Rule)."""
    kind = tasks.kind_of(architecture)
    return self.task_rules(kind, config) if kind else self.model_rules(architecture, config)

  @abc.abstractmethod
  def model_rules(self, architecture: str, config: Any) -> Sequence[Rule]:
    """The parameter table of an architecture that is not a task class."""

  def encoder_rules(self, hf: str, ours: str, config: Any) -> list[Rule]:
    """The bare encoder's tensors, below the prefixes `hf` (transformers') and `ours`."""
    raise NotImplementedError(f"The {self.name} family declares no encoder_rules; its task "
                              "classes need them.")

  def pooler_rules(self, hf: str, ours: str) -> list[Rule]:
    """The encoder's pooler (a dense layer), below the two prefixes."""
    return linear(f"{hf}{self.pooler_layer}", f"{ours}pooler")

  def task_rules(self, kind: str, config: Any) -> list[Rule]:
    """A task class's table: the encoder (with its pooler for `pooled_kinds`) and the head."""
    hf, ours = self.task_encoder_prefix, tasks.ENCODER
    pooler = self.pooler_rules(hf, ours) if kind in self.pooled_kinds else []
    return self.encoder_rules(hf, ours, config) + pooler + self.task_head_rules(kind, config)

  def task_head_rules(self, kind: str, config: Any) -> list[Rule]:
    """The head of a task class, from `task_heads`."""
    return tasks.head_rules(*self.task_heads[kind])

  # Defaults most families keep.
  def init_inputs(self, config: Any) -> dict:
    """Keyword arguments for module.init (shapes only matter)."""
    return {"input_ids": jnp.zeros((1, 8), jnp.int32)}

  def check_architecture(self, architecture: str, source: str | None = None) -> None:
    """Fails on a class this family does not implement; `source` names the file that asked
    for it (config.json's `architectures`, a checkpoint's metadata.json)."""
    if architecture not in self.architectures:
      where = f"{source}: " if source else ""
      raise ValueError(
          f"{where}architecture {architecture!r} is not supported for model_type "
          f"{self.model_types[0]!r}; supported: {sorted(self.architectures)}. Save the model "
          "as one of those classes (e.g. with transformers: AutoModel.from_pretrained(DIR)"
          ".save_pretrained(NEW_DIR) keeps its bare encoder), or add the class to "
          f"{type(self).__module__.replace('.', '/')}.py.")

  def is_ignored(self, key: str) -> bool:
    return any(re.fullmatch(p, key) for p in self.ignored_keys)

  def prepare_inputs(self, inputs: Mapping[str, Any]) -> dict:
    """The reference's call arguments -> our module's (e.g. XLNet's per-layer `mems` list)."""
    return dict(inputs)

  def state_from_hf(self, state: Mapping[str, Any], config: Any) -> dict:
    """The HF state dict as the rules read it (e.g. GPT's fused, [in, out] Conv1D weights
    split into per-projection torch-Linear tensors)."""
    return dict(state)

  def state_to_hf(self, state: Mapping[str, Any], config: Any) -> dict:
    """The inverse of `state_from_hf`, applied to what the rules write."""
    return dict(state)

  def can_generate(self, architecture: str) -> bool:
    """Whether `architecture` has a language-model head that `HFModel.generate` decodes with
    (bertjax.inference.decoding: decoder-only `__call__(..., decode=True)` or `encode`/`decode` methods)."""
    return architecture.endswith(("LMHeadModel", "ForCausalLM", "ForConditionalGeneration"))

  def outputs(self, architecture: str, outputs: Mapping[str, Any]) -> dict:
    names = self.architectures[architecture] + ("hidden_states",)
    return {k: v for k, v in outputs.items() if k in names and v is not None}
