"""Any model run with its attention probabilities out and head masks in.

Every dense attention layer passes its probabilities through `layers.attention.observe`:
it multiplies them by a head mask found in the `head_mask` collection and records them in
the `intermediates` collection when that is mutable. A *site* is one attention module of
the model (a scanned stack's is one site of `num_layers` layers). This module finds the
sites, builds the `head_mask` collection from [layers, heads] arrays, and names the
recorded probabilities as transformers does:

  encoders and decoders   `attentions`                 (mask argument `head_mask`)
  encoder-decoders        `encoder_attentions`         (`head_mask`)
                          `decoder_attentions`         (`decoder_head_mask`)
                          `cross_attentions`           (`cross_attn_head_mask`)

Each output is one array [layers, batch, heads, query, key] (`out["attentions"][i]` is
layer i, as transformers' tuple entry i). XLNet's are its content stream's.
"""
import dataclasses
from typing import Any, Mapping, Optional

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
from flax import traverse_util

from bertjax.layers import attention

# Output name -> the argument that masks its heads.
MASK_ARGUMENTS = {"attentions": "head_mask", "encoder_attentions": "head_mask",
                  "decoder_attentions": "decoder_head_mask",
                  "cross_attentions": "cross_attn_head_mask"}
WITH_DENSE_ATTENTION = ("BERT, RoBERTa, ALBERT, ELECTRA, DistilBERT, SpanBERT, DeBERTa, XLNet, "
                        "GPT, GPT-2, T5, BART")


@dataclasses.dataclass(frozen=True)
class Site:
  """One attention module: its path in the module tree, depth, heads and output name."""
  path: tuple[str, ...]
  num_layers: int
  num_heads: int
  output: str
  scanned: bool


def output_name(path: tuple[str, ...], encoder_decoder: bool) -> str:
  if "cross_attention" in path:
    return "cross_attentions"
  if not encoder_decoder:
    return "attentions"
  return "decoder_attentions" if "decoder" in path else "encoder_attentions"


def find_sites(module: nn.Module, variables: Mapping, *args, encoder_decoder: bool = False,
               method: Any = None, **kwargs) -> list[Site]:
  """The attention sites that `module.apply(variables, *args, **kwargs)` runs, in call
  order (shapes only: nothing is computed)."""
  recorded = jax.eval_shape(
      lambda v: module.apply(v, *args, mutable=[attention.INTERMEDIATES], method=method,
                             **kwargs)[1], dict(variables))
  sites = []
  for key, value in _recorded(recorded):
    shape = value[0].shape
    scanned = len(shape) == 5
    sites.append(Site(key[:-1], shape[0] if scanned else 1, shape[-3],
                      output_name(key[:-1], encoder_decoder), scanned))
  return sites


def _recorded(intermediates: Mapping) -> list[tuple[tuple, Any]]:
  flat = traverse_util.flatten_dict(dict(intermediates.get(attention.INTERMEDIATES, {})))
  return [(k, v) for k, v in flat.items() if k[-1] == attention.PROBS_NAME]


def layout(sites: list[Site]) -> dict[str, tuple[int, int]]:
  """Output name -> (layers, heads) of the [layers, heads] mask that covers it."""
  shapes = {}
  for site in sites:
    layers, heads = shapes.get(site.output, (0, site.num_heads))
    shapes[site.output] = (layers + site.num_layers, heads)
  return shapes


def check_sites(sites: list[Site], module: nn.Module, argument: str) -> None:
  if not sites:
    raise ValueError(
        f"{argument}: {type(module).__name__} has no attention layer with dense [query, key] "
        "probabilities (block-sparse, windowed and low-rank attention and LSTMs have none); "
        f"families with them: {WITH_DENSE_ATTENTION}.")


def check_mask(mask: Any, argument: str, shape: tuple[int, int], model: str) -> np.ndarray:
  """A [layers, heads] head mask as float32, or a ValueError naming `argument` and the shape."""
  array = np.asarray(mask, np.float32) if not isinstance(mask, jax.Array) else mask
  if tuple(np.shape(array)) != tuple(shape):
    raise ValueError(f"{argument} has shape {tuple(np.shape(array))}, but {model} has "
                     f"{shape[0]} layers x {shape[1]} heads: give a [layers, heads] array of "
                     f"shape {tuple(shape)} (1 keeps a head, 0 drops it).")
  return jnp.asarray(array, jnp.float32)


def head_mask_collection(sites: list[Site], masks: Mapping[str, Any], model: str) -> dict:
  """The `head_mask` collection for masks given by argument name (`head_mask`, ...)."""
  shapes = layout(sites)
  by_argument = {MASK_ARGUMENTS[name]: name for name in shapes}
  unknown = set(masks) - set(by_argument)
  if unknown:
    raise ValueError(f"{sorted(unknown)[0]}: {model} has no such attention; its head masks are "
                     f"{sorted(by_argument)}.")
  checked = {by_argument[arg]: check_mask(m, arg, shapes[by_argument[arg]], model)
             for arg, m in masks.items() if m is not None}
  flat, start = {}, {name: 0 for name in shapes}
  for site in sites:
    if site.output not in checked:
      continue
    first = start[site.output]
    rows = checked[site.output][first:first + site.num_layers]
    start[site.output] += site.num_layers
    flat[site.path + (attention.HEAD_MASK_NAME,)] = rows if site.scanned else rows[0]
  return traverse_util.unflatten_dict(flat)


def collect(intermediates: Mapping, sites: list[Site]) -> dict[str, jax.Array]:
  """Output name -> [layers, batch, heads, query, key] from the recorded probabilities."""
  flat = dict(_recorded(intermediates))
  parts: dict[str, list] = {}
  for site in sites:
    probs = flat[site.path + (attention.PROBS_NAME,)][0]
    parts.setdefault(site.output, []).append(probs if site.scanned else probs[None])
  return {name: jnp.concatenate(p, axis=0) for name, p in parts.items()}


def apply(module: nn.Module, variables: Mapping, *args, output_attentions: bool = False,
          head_mask: Optional[Any] = None, decoder_head_mask: Optional[Any] = None,
          cross_attn_head_mask: Optional[Any] = None, encoder_decoder: Optional[bool] = None,
          method: Any = None, **kwargs) -> dict:
  """`module.apply(variables, *args, **kwargs)` with transformers' `output_attentions` and
  head masks ([layers, heads]; the head's probabilities are multiplied by its entry).

  encoder_decoder: name the outputs encoder / decoder / cross (default: whether the module
  has a `decode` method, as T5 and BART do).
  """
  masks = {"head_mask": head_mask, "decoder_head_mask": decoder_head_mask,
           "cross_attn_head_mask": cross_attn_head_mask}
  masks = {k: v for k, v in masks.items() if v is not None}
  if not output_attentions and not masks:
    return module.apply(variables, *args, method=method, **kwargs)
  if encoder_decoder is None:
    encoder_decoder = hasattr(module, "decode") and hasattr(module, "encode")
  variables = {k: v for k, v in variables.items() if k != attention.HEAD_MASK}
  sites = find_sites(module, variables, *args, encoder_decoder=encoder_decoder, method=method,
                     **kwargs)
  check_sites(sites, module, "output_attentions" if output_attentions else next(iter(masks)))
  collection = head_mask_collection(sites, masks, type(module).__name__)
  if collection:
    variables[attention.HEAD_MASK] = collection
  if not output_attentions:
    return module.apply(variables, *args, method=method, **kwargs)
  out, state = module.apply(variables, *args, mutable=[attention.INTERMEDIATES], method=method,
                            **kwargs)
  return {**out, **collect(state, sites)}
