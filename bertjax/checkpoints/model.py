"""The runnable model every format becomes, and `from_hf` / `to_hf`.

`HFModel` is what `from_hf` and `open_model` return: a family's module
and params, called with the reference's input names, plus where it came from and its
tokenizer. It sits above the family kernel (bertjax.hf: `Family`, `Rule`, the registry,
tensor I/O) and the families (bertjax.models), so imports run one way.
"""
import dataclasses
import functools
import logging
import os
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
from flax import traverse_util

from bertjax.inference import decoding, runners
from bertjax.inference.config import GenerationConfig
from bertjax.hf import io, mapping, registry
from bertjax.hf.family import Family
from bertjax.hf.seq2seq import Seq2SeqFamily
from bertjax.models.common import attention_maps, task_heads
from bertjax.layers.embeddings import check_length
from bertjax.models.common.config import max_positions

log = logging.getLogger(__name__)


@dataclasses.dataclass
class HFModel:
  """A model converted from (or exportable to) Hugging Face.

  Call it with the reference's input names (`input_ids`, `attention_mask`, ...); it
  returns numpy arrays named like the reference class's outputs. An opened model also
  knows the folder holding its tokenizer files, the folder it was read from and what it
  was there ('Hugging Face folder', 'step 7'...).
  """
  family: Family
  architecture: str
  config: Any
  module: nn.Module
  params: Any
  tokenizer_dir: str | None = None
  source: str | None = None
  origin: str | None = None

  @functools.cached_property
  def tokenizer(self):
    """The model's tokenizer, as transformers' fast tokenizer runs it: a `tokenizers.Tokenizer`
    whose `encode(text)` / `encode(text_a, text_b)` add the family's special tokens
    (`.ids`, `.attention_mask`, `.type_ids`, `.offsets`); padding and truncation off."""
    if self.tokenizer_dir is None:
      raise ValueError(f"This {self.architecture} was built in memory and has no tokenizer "
                       "folder; open it from a folder with bertjax.open_model(path).")
    from bertjax.data import hf_tokenizer  # pylint: disable=g-import-not-at-top
    return hf_tokenizer.load(self.tokenizer_dir).tokenizer

  @property
  def description(self) -> str:
    """One line for logs and reports, e.g. 'bert BertModel (step 7) from /runs/a'."""
    return f"{self.family.name} {self.architecture} ({self.origin}) from {self.source}"

  def fit_inputs(self, arrays: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Task arrays as this model takes them: a model with a single token type
    (RoBERTa: type_vocab_size = 1) sees pairs with type 0 throughout, as its own
    tokenizer feeds them; a type id past its table would read garbage."""
    if "token_type_ids" in arrays and getattr(self.config, "type_vocab_size", 2) == 1:
      return {**arrays, "token_type_ids": np.zeros_like(arrays["token_type_ids"])}
    return arrays

  def __call__(self, *, output_attentions: bool = False, head_mask=None,
               decoder_head_mask=None, cross_attn_head_mask=None,
               **inputs) -> dict[str, np.ndarray]:
    """output_attentions: also each layer's attention probabilities, as one array
    [layers, batch, heads, query, key] per name (`attentions`; `encoder_attentions`,
    `decoder_attentions`, `cross_attentions` for T5 / BART). head_mask /
    decoder_head_mask / cross_attn_head_mask: [layers, heads], multiplying each head's
    probabilities (1 keeps it, 0 drops it), as transformers' head_mask did
    (bertjax.models.common.attention_maps)."""
    inputs = self.family.prepare_inputs(inputs)
    self._check_positions(inputs)
    arrays = {k: jnp.asarray(v) for k, v in inputs.items() if v is not None and _is_array(v)}
    static = tuple(sorted((k, v) for k, v in inputs.items() if v is not None and not _is_array(v)))
    masks = {k: v for k, v in (("head_mask", head_mask), ("decoder_head_mask", decoder_head_mask),
                               ("cross_attn_head_mask", cross_attn_head_mask)) if v is not None}
    if output_attentions or masks:
      outputs = _apply_looking(self.module, static, bool(output_attentions),
                               isinstance(self.family, Seq2SeqFamily))(self.params, arrays, masks)
    else:
      outputs = _apply(self.module, static)(self.params, arrays)
    result = self.family.outputs(self.architecture, outputs)
    result.update({k: v for k, v in outputs.items() if k in attention_maps.MASK_ARGUMENTS})
    return {k: np.asarray(v) for k, v in result.items()}

  def generate(self, input_ids, attention_mask=None, **kwargs) -> np.ndarray:
    """Token ids as transformers' `generate` returns them (greedy, beam search, sampling;
    see bertjax.inference.decoding.generate for the arguments)."""
    if not self.family.can_generate(self.architecture):
      raise ValueError(f"{self.architecture} has no language-model head to generate with; "
                       "load a ...LMHeadModel / ...ForConditionalGeneration checkpoint.")
    self._check_generation_length(np.shape(input_ids)[-1], kwargs)
    return decoding.generate(self.module, self.params, input_ids, attention_mask,
                             model_config=self.config, **kwargs)

  def _check_positions(self, inputs: dict) -> None:
    """Inputs past the position table would come out NaN: refuse them by name."""
    limit = max_positions(self.config)
    if limit is None:
      return
    for ids, positions in (("input_ids", "position_ids"),
                           ("decoder_input_ids", "decoder_position_ids")):
      if inputs.get(positions) is not None and np.size(inputs[positions]):
        largest = int(np.max(inputs[positions]))
        if largest >= limit:
          raise ValueError(f"{positions} go up to {largest}, but {self.architecture} has {limit} "
                           f"positions (max_position_embeddings): use positions 0..{limit - 1}, "
                           f"i.e. rows of at most {limit} tokens.")
      elif inputs.get(ids) is not None:
        check_length(np.shape(inputs[ids])[-1], limit, f"{ids} (for {self.architecture})")

  def _check_generation_length(self, prompt: int, kwargs: dict) -> None:
    """The decoder's whole sequence (prompt or start token + new tokens) must fit the table."""
    limit = max_positions(self.config)
    if limit is None:
      return
    encoder_decoder = isinstance(runners.runner(self.module), runners.EncoderDecoder)
    if encoder_decoder:
      check_length(prompt, limit, f"input_ids (for {self.architecture})")
    start = 1 if encoder_decoder else prompt
    total = None if "max_new_tokens" in kwargs else kwargs.get("max_length")
    total = total or start + kwargs.get("max_new_tokens", GenerationConfig.max_new_tokens)
    check_length(total, limit, "generate(): the decoded sequence (" + (
                     "start token" if encoder_decoder else "prompt") + " + max_new_tokens)",
                 fix=f"Ask for at most {limit - start} new tokens (max_new_tokens)")


def _is_array(value) -> bool:
  return isinstance(value, (np.ndarray, jax.Array)) or hasattr(value, "__array__")


@functools.lru_cache(maxsize=64)
def _apply(module: nn.Module, static: tuple):
  return jax.jit(lambda params, arrays: module.apply({"params": params}, **arrays, **dict(static)))


@functools.lru_cache(maxsize=64)
def _apply_looking(module: nn.Module, static: tuple, output_attentions: bool,
                   encoder_decoder: bool):
  return jax.jit(lambda params, arrays, masks: attention_maps.apply(
      module, {"params": params}, output_attentions=output_attentions,
      encoder_decoder=encoder_decoder, **masks, **arrays, **dict(static)))


def expected_shapes(family: Family, module: nn.Module, config: Any) -> dict[str, tuple]:
  inputs = family.init_inputs(config)
  if isinstance(module, task_heads.MultipleChoice):  # rows of [batch, choices, length]
    inputs = {k: v[:, None] for k, v in inputs.items()}
  abstract = jax.eval_shape(lambda: nn.unbox(module.init(jax.random.PRNGKey(0),
                                                         **inputs)["params"]))
  return {k: v.shape for k, v in traverse_util.flatten_dict(abstract, sep="/").items()}


def from_hf(path: str | os.PathLike) -> HFModel:
  """Loads a local Hugging Face model directory (config.json + safetensors / .bin)."""
  hf_config = io.read_config(path)
  source = os.path.join(str(path), io.CONFIG_FILE)
  if "model_type" not in hf_config:
    raise ValueError(f"{source} has no 'model_type'; cannot tell which model family it is.")
  family = registry.family_for(hf_config["model_type"], source)
  architecture = (hf_config.get("architectures") or [next(iter(family.architectures))])[0]
  family.check_architecture(architecture, source)
  config = family.config_from_hf(hf_config)
  module = family.make_module(architecture, config)
  state, weights_file = io.load_state_dict(path)
  state = family.state_from_hf(state, config)
  rules = family.rules(architecture, config)
  flat = mapping.hf_to_ours(rules, state, expected_shapes(family, module, config), weights_file)
  leftovers = [k for k in mapping.unused_keys(rules, state, _num_layers(config))
               if not family.is_ignored(k)]
  if leftovers:
    log.warning("%s: %d tensors not used by %s: %s", weights_file, len(leftovers), architecture,
                leftovers[:10])
  params = traverse_util.unflatten_dict({k: jnp.asarray(v) for k, v in flat.items()}, sep="/")
  return HFModel(family, architecture, config, module, params)


def to_hf(model: HFModel, path: str | os.PathLike) -> None:
  """Writes `model` as a Hugging Face directory that transformers' from_pretrained loads.

  Its weights are checked against its config first: nothing is written for a model
  whose config (a checkpoint's metadata) disagrees with its weights.
  """
  check_exportable(model.config)
  flat = {k: np.asarray(v) for k, v in
          traverse_util.flatten_dict(jax.device_get(model.params), sep="/").items()}
  check_weights_fit_config(model, {k: v.shape for k, v in flat.items()})
  state = mapping.ours_to_hf(model.family.rules(model.architecture, model.config), flat)
  state = model.family.state_to_hf(state, model.config)
  io.write_model_dir(path, model.family.config_to_hf(model.config, model.architecture), state)


def check_exportable(config: Any) -> None:
  """Refuses the research variants transformers' classes cannot run (rotary positions, an
  encoder's pre-LN): their export would load as another model, silently. A family whose
  own architecture they are (EXPORTS_VARIANTS: ModernBERT) exports them."""
  if getattr(config, "EXPORTS_VARIANTS", False):
    return
  variants = []
  if getattr(config, "position_embedding", "absolute") != "absolute":
    variants.append(f"position_embedding={config.position_embedding!r}")
  if getattr(config, "ENCODER_VARIANTS", False) and config.pre_norm:  # GPT's is GPT-2's own
    variants.append("pre_norm=True")
  if variants:
    raise ValueError(f"{type(config).__name__} with {', '.join(variants)} is a research variant "
                     "that transformers' classes for this family do not have, so it cannot be "
                     "exported to Hugging Face. Nothing was written.")


def check_weights_fit_config(model: HFModel, shapes: dict[str, tuple]) -> None:
  """Every tensor the config implies, at its shape, and no other: else an error naming
  the first (sorted) tensor that disagrees."""
  expected = expected_shapes(model.family, model.module, model.config)
  for key in sorted(expected.keys() | shapes.keys()):
    ours, theirs = shapes.get(key), expected.get(key)
    if ours != theirs:
      where = model.source or "The model"
      found = f"has shape {ours}" if ours is not None else "is missing"
      wanted = f"shape {theirs}" if theirs is not None else "no such tensor"
      raise ValueError(
          f"{where}: its weights disagree with its config ({model.architecture}, "
          f"{_config_summary(model.config)}): tensor {key!r} {found} in the weights, but the "
          f"config implies {wanted}. Fix the config (a converted checkpoint's model.json) "
          "to match the weights, or re-convert the model. Nothing was written.")


def _config_summary(config: Any) -> str:
  names = ("vocab_size", "hidden_size", "num_layers", "num_heads", "intermediate_size",
           "max_position_embeddings", "type_vocab_size")
  return ", ".join(f"{n}={getattr(config, n)}" for n in names if hasattr(config, n))


def _num_layers(config: Any) -> int:
  return getattr(config, "num_layers", 0)
