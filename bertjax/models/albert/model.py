"""ALBERT (Lan et al., 2020): BERT with fewer parameters, plus sentence-order prediction.

Two changes cut the parameter count (paper Table 1: base 12M vs BERT-base 108M):
  * factorized embeddings: a V x E table (E = 128) followed by an E x H projection
    instead of a V x H table;
  * cross-layer sharing: one Transformer layer's parameters reused at every depth,
    which is `TransformerStack(share_parameters=True)` - the same `nn.scan`, with the
    parameters broadcast instead of stacked on a `layers` axis.
The MLM head projects back to E so the output embedding stays tied to the V x E table.
`num_hidden_groups = num_layers` gives the paper's "not-shared" ablation.
"""
import dataclasses

import flax.linen as nn
import jax.numpy as jnp

from bertjax.layers import attention, dense, embeddings, transformer
from bertjax.models import bert


@dataclasses.dataclass(frozen=True)
class AlbertConfig(bert.BertConfig):
  vocab_size: int = 30000
  embedding_size: int = 128
  hidden_act: str = "gelu_new"
  hidden_dropout: float = 0.0  # ALBERT v2 trains without dropout
  attention_dropout: float = 0.0
  classifier_dropout: float = 0.1
  # 1: every layer shares one set of parameters; num_layers: no sharing.
  num_hidden_groups: int = 1
  ENCODER_VARIANTS = False  # ALBERT's own modules: absolute positions, post-LN

  def __post_init__(self):
    super().__post_init__()
    if self.num_hidden_groups not in (1, self.num_layers):
      raise ValueError(f"num_hidden_groups={self.num_hidden_groups} is not supported: use 1 "
                       f"(all layers shared) or num_layers={self.num_layers} (none shared).")

  @property
  def share_parameters(self) -> bool:
    return self.num_hidden_groups == 1 and self.num_layers > 1


def _size(layers: int, hidden: int, heads: int, **overrides) -> AlbertConfig:
  return AlbertConfig(hidden_size=hidden, num_layers=layers, num_heads=heads,
                      intermediate_size=4 * hidden, **overrides)


def albert_base(**overrides) -> AlbertConfig:
  return _size(12, 768, 12, **overrides)


def albert_large(**overrides) -> AlbertConfig:
  return _size(24, 1024, 16, **overrides)


def albert_xlarge(**overrides) -> AlbertConfig:
  return _size(24, 2048, 16, **overrides)


def albert_xxlarge(**overrides) -> AlbertConfig:
  return _size(12, 4096, 64, **overrides)


SIZES = {"base": albert_base, "large": albert_large, "xlarge": albert_xlarge,
         "xxlarge": albert_xxlarge}


class AlbertModel(nn.Module):
  """Factorized embeddings -> E x H projection -> shared Transformer stack -> pooler.

  `hidden_states[0]` is the projected embedding (width H), as in the reference.
  """
  config: AlbertConfig
  add_pooling_layer: bool = True

  def setup(self):
    cfg = self.config
    dtype = jnp.dtype(cfg.dtype)
    self.embeddings = embeddings.TextEmbeddings(
        cfg.vocab_size, cfg.embedding_size, cfg.max_position_embeddings, cfg.type_vocab_size,
        cfg.layer_norm_eps, cfg.hidden_dropout, cfg.initializer_range, dtype)
    self.embedding_projection = dense.DenseGeneral(
        cfg.hidden_size, (None, "embed"), init_std=cfg.initializer_range, dtype=dtype)
    self.encoder = transformer.TransformerStack(
        cfg.num_layers, cfg.num_heads, cfg.head_dim, cfg.intermediate_size, cfg.hidden_act,
        cfg.hidden_dropout, cfg.attention_dropout, cfg.layer_norm_eps,
        init_std=cfg.initializer_range, dtype=dtype, share_parameters=cfg.share_parameters,
        remat=cfg.remat, scan_unroll=cfg.scan_unroll,
        attention_implementation=cfg.attention_implementation)
    if self.add_pooling_layer:
      self.pooler = dense.DenseGeneral(cfg.hidden_size, ("embed", "mlp"),
                                       init_std=cfg.initializer_range, dtype=dtype)

  def __call__(self, input_ids, attention_mask=None, token_type_ids=None, position_ids=None,
               segment_ids=None, *, deterministic: bool = True,
               output_hidden_states: bool = False) -> dict:
    x = self.embeddings(input_ids, position_ids, token_type_ids, deterministic=deterministic)
    x = nn.with_logical_constraint(self.embedding_projection(x), ("batch", "length", "embed"))
    mask = attention.encoder_mask(attention_mask, segment_ids)
    out, per_layer = self.encoder(x, mask, deterministic=deterministic,
                                  output_hidden_states=output_hidden_states)
    result = {"last_hidden_state": out,
              "pooler_output": jnp.tanh(self.pooler(out[:, 0])) if self.add_pooling_layer else None}
    if output_hidden_states:
      result["hidden_states"] = jnp.concatenate([x[None], per_layer], axis=0)
    return result


class AlbertForPreTraining(nn.Module):
  """ALBERT with the MLM head (`prediction_logits`) and the SOP head (`sop_logits`)."""
  config: AlbertConfig

  def setup(self):
    cfg = self.config
    self.albert = AlbertModel(cfg)
    self.predictions = bert.MlmHead(cfg)
    self.sop_dropout = nn.Dropout(cfg.classifier_dropout)
    self.sop_classifier = dense.DenseGeneral(2, ("embed", None), init_std=cfg.initializer_range,
                                             dtype=jnp.dtype(cfg.dtype))

  def __call__(self, input_ids, attention_mask=None, token_type_ids=None, position_ids=None,
               segment_ids=None, *, deterministic: bool = True,
               output_hidden_states: bool = False) -> dict:
    out = self.albert(input_ids, attention_mask, token_type_ids, position_ids, segment_ids,
                      deterministic=deterministic, output_hidden_states=output_hidden_states)
    out["prediction_logits"] = self.predictions(out["last_hidden_state"],
                                                self.albert.embeddings.word_embeddings)
    pooled = self.sop_dropout(out["pooler_output"], deterministic=deterministic)
    out["sop_logits"] = self.sop_classifier(pooled)
    return out


class AlbertForMaskedLM(nn.Module):
  """ALBERT without pooler, with the MLM head: `logits`."""
  config: AlbertConfig

  def setup(self):
    self.albert = AlbertModel(self.config, add_pooling_layer=False)
    self.predictions = bert.MlmHead(self.config)

  def __call__(self, input_ids, attention_mask=None, token_type_ids=None, position_ids=None,
               segment_ids=None, *, deterministic: bool = True,
               output_hidden_states: bool = False) -> dict:
    out = self.albert(input_ids, attention_mask, token_type_ids, position_ids, segment_ids,
                      deterministic=deterministic, output_hidden_states=output_hidden_states)
    out["logits"] = self.predictions(out["last_hidden_state"],
                                     self.albert.embeddings.word_embeddings)
    return out
