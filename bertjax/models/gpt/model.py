"""GPT decoders: OpenAI GPT (Radford et al., 2018) and GPT-2 (Radford et al., 2019).

A left-to-right Transformer language model, the "LTR & No NSP" baseline of BERT's
Table 5. Learned absolute positions; token types (when given) are looked up in the
token table, as the references do. OpenAI GPT is post-LN with no final norm; GPT-2 is
pre-LN with a final LayerNorm. The output projection is tied to the token table.

Incremental decoding (bertjax.inference.decoding): `decode=True` keeps a key/value cache per
layer; `attention_mask` then spans the cache and `position_ids` are the new tokens'.
"""
import dataclasses
from typing import Optional

import flax.linen as nn
import jax.numpy as jnp

from bertjax.layers import activations, attention, embeddings, norms, transformer
from bertjax.models.common import positions


@dataclasses.dataclass(frozen=True)
class GPTConfig:
  vocab_size: int = 50257
  hidden_size: int = 768
  num_layers: int = 12
  num_heads: int = 12
  intermediate_size: int = 3072
  max_position_embeddings: int = 1024
  hidden_act: str = "gelu_new"
  hidden_dropout: float = 0.1       # resid_pdrop
  embedding_dropout: float = 0.1    # embd_pdrop
  attention_dropout: float = 0.1    # attn_pdrop
  layer_norm_eps: float = 1e-5
  pre_norm: bool = True             # GPT-2; False = OpenAI GPT (post-LN, no final norm)
  # 'absolute' (GPT's learned table) or 'rotary' (models.common.positions: a research variant
  # for tables whose encoders are rotary; transformers' GPT classes have none).
  position_embedding: str = "absolute"
  rotary_base: float = 10000.0
  initializer_range: float = 0.02
  bos_token_id: Optional[int] = 50256
  eos_token_id: Optional[int] = 50256
  pad_token_id: Optional[int] = None
  dtype: str = "float32"
  remat: bool = False
  scan_unroll: int = 0  # layers per loop iteration; 0: by backend (layers_per_iteration)
  # Fine-tuning's generic heads (bertjax.finetune.task_models) read the task's labels here,
  # as from an EncoderConfig; there is no GPT task class to export to.
  labels: tuple[str, ...] = ("LABEL_0", "LABEL_1")
  problem_type: Optional[str] = None

  def __post_init__(self):
    if isinstance(self.labels, list):  # e.g. from JSON
      object.__setattr__(self, "labels", tuple(self.labels))
    if self.hidden_size % self.num_heads:
      raise ValueError(f"hidden_size={self.hidden_size} is not a multiple of "
                       f"num_heads={self.num_heads}.")
    activations.get_activation(self.hidden_act)
    positions.check(self)

  @property
  def head_dim(self) -> int:
    return self.hidden_size // self.num_heads

  @property
  def max_positions(self) -> Optional[int]:
    return None if positions.is_rotary(self) else self.max_position_embeddings

  def replace(self, **changes) -> "GPTConfig":
    return dataclasses.replace(self, **changes)


def openai_gpt(**overrides) -> GPTConfig:
  """The 12-layer, 512-position model of Radford et al. (2018), 40478 BPE tokens."""
  values = dict(vocab_size=40478, max_position_embeddings=512, pre_norm=False, bos_token_id=None,
                eos_token_id=None)
  return GPTConfig(**{**values, **overrides})


def _gpt2(hidden: int, layers: int, heads: int, **overrides) -> GPTConfig:
  values = dict(hidden_size=hidden, num_layers=layers, num_heads=heads,
                intermediate_size=4 * hidden)
  return GPTConfig(**{**values, **overrides})


def gpt2(**overrides) -> GPTConfig:
  return _gpt2(768, 12, 12, **overrides)


def gpt2_medium(**overrides) -> GPTConfig:
  return _gpt2(1024, 24, 16, **overrides)


def gpt2_large(**overrides) -> GPTConfig:
  return _gpt2(1280, 36, 20, **overrides)


def gpt2_xl(**overrides) -> GPTConfig:
  return _gpt2(1600, 48, 25, **overrides)


def ltr_base(**overrides) -> GPTConfig:
  """BERT Table 5's "LTR & No NSP": BERT-base's size and vocabulary, left-to-right."""
  values = dict(vocab_size=30522, max_position_embeddings=512, hidden_act="gelu",
                layer_norm_eps=1e-12, pre_norm=False, bos_token_id=None, eos_token_id=None)
  return GPTConfig(**{**values, **overrides})


SIZES = {"openai_gpt": openai_gpt, "gpt2": gpt2, "gpt2_medium": gpt2_medium,
         "gpt2_large": gpt2_large, "gpt2_xl": gpt2_xl, "ltr_base": ltr_base}


class GPTModel(nn.Module):
  """Embeddings -> causal Transformer stack [-> final LayerNorm]: `last_hidden_state`.

  `hidden_states` (output_hidden_states) are the embeddings and every layer's output, the
  last one after the final norm (as the references report them).
  """
  config: GPTConfig

  def setup(self):
    cfg = self.config
    dtype = jnp.dtype(cfg.dtype)
    self.token_embeddings = embeddings.Embed(cfg.vocab_size, cfg.hidden_size, ("vocab", "embed"),
                                             cfg.initializer_range, dtype)
    if not positions.is_rotary(cfg):
      self.position_embeddings = embeddings.Embed(cfg.max_position_embeddings, cfg.hidden_size,
                                                  (None, "embed"), cfg.initializer_range, dtype)
    self.embedding_dropout = nn.Dropout(cfg.embedding_dropout)
    self.decoder = transformer.TransformerStack(
        cfg.num_layers, cfg.num_heads, cfg.head_dim, cfg.intermediate_size, cfg.hidden_act,
        cfg.hidden_dropout, cfg.attention_dropout, cfg.layer_norm_eps, pre_norm=cfg.pre_norm,
        init_std=cfg.initializer_range, dtype=dtype, remat=cfg.remat,
        scan_unroll=cfg.scan_unroll, rotary_base=positions.rotary_base(cfg))
    if cfg.pre_norm:
      self.final_norm = norms.LayerNorm(cfg.layer_norm_eps, dtype)

  def __call__(self, input_ids, attention_mask=None, token_type_ids=None, position_ids=None,
               segment_ids=None, *, deterministic: bool = True, decode: bool = False,
               output_hidden_states: bool = False) -> dict:
    length = input_ids.shape[1]
    if decode:
      # The cache masks future and unfilled slots; attention_mask spans the cache.
      mask = None if attention_mask is None else attention.key_padding_mask(attention_mask)
      if position_ids is None:
        raise ValueError("Incremental decoding needs the new tokens' position_ids [B, q] "
                         "(bertjax.inference.decoding passes them).")
    else:
      mask = attention.combine_masks(attention.causal_mask(length),
                                     attention.encoder_mask(attention_mask, segment_ids))
      if position_ids is None:
        if not positions.is_rotary(self.config):
          embeddings.check_length(length, self.config.max_position_embeddings, "input_ids")
        position_ids = jnp.broadcast_to(jnp.arange(length), input_ids.shape)
    x = self.token_embeddings(input_ids)
    if not positions.is_rotary(self.config):
      x = x + self.position_embeddings(position_ids)
    if token_type_ids is not None:
      x = x + self.token_embeddings(token_type_ids)
    x = self.embedding_dropout(x, deterministic=deterministic)
    x = nn.with_logical_constraint(x, ("batch", "length", "embed"))
    out, per_layer = self.decoder(x, mask, deterministic=deterministic, decode=decode,
                                  output_hidden_states=output_hidden_states,
                                  **positions.stack_inputs(self.config, position_ids))
    if self.config.pre_norm:
      out = self.final_norm(out)
    hidden = None
    if output_hidden_states:
      hidden = jnp.concatenate([x[None], per_layer[:-1], out[None]], axis=0)
    return {"last_hidden_state": out, "pooler_output": None, "hidden_states": hidden}


class GPTLMHeadModel(nn.Module):
  """GPTModel plus the tied vocabulary projection: `logits` [B, L, vocab]."""
  config: GPTConfig

  def setup(self):
    self.transformer = GPTModel(self.config)

  def __call__(self, input_ids, attention_mask=None, token_type_ids=None, position_ids=None,
               segment_ids=None, **kwargs) -> dict:
    out = self.transformer(input_ids, attention_mask, token_type_ids, position_ids, segment_ids,
                           **kwargs)
    logits = self.transformer.token_embeddings.attend(out["last_hidden_state"])
    out["logits"] = nn.with_logical_constraint(logits.astype(jnp.float32),
                                               ("batch", "length", "vocab"))
    return out

