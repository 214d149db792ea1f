"""ELECTRA (Clark et al., 2020): a small MLM generator and a replaced-token discriminator.

The encoder is BERT's, except that embeddings may be narrower than the encoder
(`embedding_size` E < `hidden_size` H) with a learned `embeddings_project` E -> H.
Pretraining (`ElectraGeneratorDiscriminator`) runs both networks in one forward pass:

  1. the generator (same depth, a `generator_fraction` of the width) predicts the
     masked tokens;
  2. replacements are *sampled* from its softmax - through `stop_gradient` and
     `jax.random.categorical`, so no gradient flows from the discriminator into the
     generator - using the 'sample' RNG stream;
  3. the discriminator labels every token original / replaced (a sampled token
     equal to the original counts as original, as in the paper).

Token, position and token-type embeddings are one module shared by both networks.
HF-compatible single networks: `ElectraModel`, `ElectraForPreTraining` (discriminator)
and `ElectraForMaskedLM` (generator).
"""
import dataclasses
from typing import ClassVar, Optional

import flax.linen as nn
import jax
import jax.numpy as jnp

from bertjax.layers import activations, attention, dense, embeddings, norms, transformer
from bertjax.models import bert
from bertjax.models.common import positions
from bertjax.models.common.config import EncoderConfig


@dataclasses.dataclass(frozen=True)
class ElectraConfig(EncoderConfig):
  """Sizes of the discriminator (or of a lone generator, for ElectraForMaskedLM);
  defaults: ELECTRA-Small."""
  hidden_size: int = 256
  num_heads: int = 4
  intermediate_size: int = 1024
  embedding_size: int = 128
  # Joint pretraining: generator width (hidden, heads, intermediate) as a fraction of
  # the discriminator's; the paper uses 1/4 (small, large) to 1/3 (base). 1.0 for the
  # two-stage variant, where the discriminator starts from the generator's weights.
  generator_fraction: float = 0.25
  # ElectraForMultipleChoice's sequence summary (transformers' summary_*): which token, the
  # activation after its dense layer, the dropout after it.
  summary_type: str = "first"
  summary_activation: str = "gelu"
  summary_last_dropout: float = 0.1
  ENCODER_VARIANTS = True  # rotary positions and pre-LN (models.common.config)

  def __post_init__(self):
    super().__post_init__()
    if not 0.0 < self.generator_fraction <= 1.0:
      raise ValueError(f"generator_fraction={self.generator_fraction} must be in (0, 1] "
                       "(the paper uses 1/4 to 1/2).")

  def generator_config(self) -> "ElectraConfig":
    """The generator: same depth and embeddings, `generator_fraction` of the width."""
    f = self.generator_fraction
    heads = max(1, round(self.num_heads * f))
    hidden = round(self.hidden_size * f)
    if hidden % heads:
      raise ValueError(f"generator_fraction={f} gives a generator of width {hidden} with "
                       f"{heads} heads, which does not divide; pick a fraction that does.")
    return self.replace(hidden_size=hidden, num_heads=heads,
                        intermediate_size=round(self.intermediate_size * f))


# Paper sizes (Clark et al. 2020, Table 6); the generator multiplier is 1/4, 1/3, 1/4.
def electra_small(**overrides) -> ElectraConfig:
  return ElectraConfig(**overrides)


def electra_base(**overrides) -> ElectraConfig:
  return ElectraConfig(**{**dict(embedding_size=768, hidden_size=768, num_heads=12,
                                 intermediate_size=3072, generator_fraction=1 / 3), **overrides})


def electra_large(**overrides) -> ElectraConfig:
  return ElectraConfig(**{**dict(embedding_size=1024, hidden_size=1024, num_layers=24,
                                 num_heads=16, intermediate_size=4096), **overrides})


SIZES = {"small": electra_small, "base": electra_base, "large": electra_large}


def text_embeddings(cfg: ElectraConfig, name: Optional[str] = None) -> embeddings.TextEmbeddings:
  return embeddings.TextEmbeddings(
      cfg.vocab_size, cfg.embedding_size, positions.table_size(cfg), cfg.type_vocab_size,
      cfg.layer_norm_eps, cfg.hidden_dropout, cfg.initializer_range, jnp.dtype(cfg.dtype),
      name=name)


class ElectraModel(nn.Module):
  """Embeddings (-> embeddings_project when E != H) -> Transformer stack. No pooler.

  shared_embeddings: an embeddings module owned by a parent (joint pretraining);
    when None the model has its own `embeddings`.
  """
  config: ElectraConfig
  shared_embeddings: Optional[embeddings.TextEmbeddings] = None

  def setup(self):
    cfg = self.config
    dtype = jnp.dtype(cfg.dtype)
    if self.shared_embeddings is None:
      self.embeddings = text_embeddings(cfg)
    if cfg.embedding_size != cfg.hidden_size:
      self.embeddings_project = dense.DenseGeneral(
          cfg.hidden_size, (None, "embed"), init_std=cfg.initializer_range, dtype=dtype)
    self.encoder = transformer.TransformerStack(
        cfg.num_layers, cfg.num_heads, cfg.head_dim, cfg.intermediate_size, cfg.hidden_act,
        cfg.hidden_dropout, cfg.attention_dropout, cfg.layer_norm_eps, pre_norm=cfg.pre_norm,
        init_std=cfg.initializer_range, dtype=dtype, remat=cfg.remat,
        scan_unroll=cfg.scan_unroll, attention_implementation=cfg.attention_implementation,
        rotary_base=positions.rotary_base(cfg))
    if cfg.pre_norm:
      self.final_norm = norms.LayerNorm(cfg.layer_norm_eps, dtype)

  def embedding_module(self) -> embeddings.TextEmbeddings:
    return self.embeddings if self.shared_embeddings is None else self.shared_embeddings

  def __call__(self, input_ids, attention_mask=None, token_type_ids=None, position_ids=None,
               segment_ids=None, *, deterministic: bool = True,
               output_hidden_states: bool = False) -> dict:
    x = self.embedding_module()(input_ids, position_ids, token_type_ids,
                                deterministic=deterministic)
    if self.config.embedding_size != self.config.hidden_size:
      x = nn.with_logical_constraint(self.embeddings_project(x), ("batch", "length", "embed"))
    mask = attention.encoder_mask(attention_mask, segment_ids)
    out, per_layer = self.encoder(x, mask, deterministic=deterministic,
                                  output_hidden_states=output_hidden_states,
                                  **positions.stack_inputs(self.config, position_ids))
    if self.config.pre_norm:
      out = self.final_norm(out)
    result = {"last_hidden_state": out, "pooler_output": None}
    if output_hidden_states:
      result["hidden_states"] = jnp.concatenate([x[None], per_layer], axis=0)
    return result


class DiscriminatorHead(nn.Module):
  """dense + activation + dense to one logit per token ("is this token replaced?")."""
  config: ElectraConfig

  @nn.compact
  def __call__(self, hidden: jax.Array) -> jax.Array:
    cfg = self.config
    dtype = jnp.dtype(cfg.dtype)
    h = dense.DenseGeneral(cfg.hidden_size, ("embed", "mlp"), init_std=cfg.initializer_range,
                           dtype=dtype, name="dense")(hidden)
    h = activations.get_activation(cfg.hidden_act)(h)
    logits = dense.DenseGeneral(1, ("mlp", None), init_std=cfg.initializer_range, dtype=dtype,
                                name="prediction")(h)
    return logits[..., 0]


def generator_head(cfg: ElectraConfig, name: Optional[str] = None) -> bert.MlmHead:
  """BERT's MLM head (dense H -> E, LayerNorm, tied output + bias); ELECTRA's generator
  always uses erf-GELU here, whatever `hidden_act` is."""
  return bert.MlmHead(cfg.replace(hidden_act="gelu"), name=name)


class ElectraForPreTraining(nn.Module):
  """The discriminator alone (HF ElectraForPreTraining): `logits` [B, L], one per token."""
  config: ElectraConfig

  def setup(self):
    self.electra = ElectraModel(self.config)
    self.discriminator_head = DiscriminatorHead(self.config)

  def __call__(self, input_ids, attention_mask=None, token_type_ids=None, position_ids=None,
               segment_ids=None, *, deterministic: bool = True,
               output_hidden_states: bool = False) -> dict:
    out = self.electra(input_ids, attention_mask, token_type_ids, position_ids, segment_ids,
                       deterministic=deterministic, output_hidden_states=output_hidden_states)
    out["logits"] = self.discriminator_head(out["last_hidden_state"])
    return out


class ElectraForMaskedLM(nn.Module):
  """The generator alone (HF ElectraForMaskedLM): `logits` [B, L, V], or [B, P, V] at
  `masked_positions` [B, P] (the head run only there, as BERT's)."""
  config: ElectraConfig

  def setup(self):
    self.electra = ElectraModel(self.config)
    self.generator_head = generator_head(self.config)

  def __call__(self, input_ids, attention_mask=None, token_type_ids=None, position_ids=None,
               segment_ids=None, masked_positions=None, *, deterministic: bool = True,
               output_hidden_states: bool = False) -> dict:
    out = self.electra(input_ids, attention_mask, token_type_ids, position_ids, segment_ids,
                       deterministic=deterministic, output_hidden_states=output_hidden_states)
    out["logits"] = self.generator_head(out["last_hidden_state"],
                                        self.electra.embedding_module().word_embeddings,
                                        masked_positions)
    return out


def sample_replacements(key: jax.Array, logits: jax.Array, input_ids: jax.Array,
                        mlm_targets: jax.Array, mlm_weights: jax.Array,
                        positions: Optional[jax.Array] = None):
  """(corrupted ids, replaced labels): sampled tokens at the masked positions.

  `logits` are [B, L, V], or [B, P, V] at `positions` [B, P] (the generator's head run
  only there, as ELECTRA's max_predictions_per_seq). Then a masked position beyond the
  P gathered ones gets its original token back: nothing was sampled for it.
  `stop_gradient` makes the sampling a constant to autodiff: the discriminator's loss
  cannot reach the generator through the tokens it was given.
  """
  sampled = jax.random.categorical(key, jax.lax.stop_gradient(logits).astype(jnp.float32))
  sampled = sampled.astype(input_ids.dtype)
  masked = mlm_weights > 0
  original = jnp.where(masked, mlm_targets, input_ids)
  if positions is None:
    corrupted = jnp.where(masked, sampled, input_ids)
  else:
    at = lambda x: jnp.take_along_axis(x, positions, axis=1)
    rows = jnp.arange(input_ids.shape[0])[:, None]
    corrupted = original.at[rows, positions].set(jnp.where(at(masked), sampled, at(original)))
  return corrupted, (corrupted != original).astype(jnp.int32)


class ElectraGeneratorDiscriminator(nn.Module):
  """Joint ELECTRA pretraining: generator -> sampled replacements -> discriminator.

  Outputs: `generator_logits` [B, L, V] (MLM over the masked input; [B, P, V] when given
  `masked_positions` [B, P], as BERT's MLM head), `discriminator_logits`
  [B, L], `replaced` [B, L] (RTD labels), `corrupted_ids` (the discriminator's input), and
  the discriminator's `last_hidden_state`. Without `mlm_weights` nothing is replaced.
  Sampling draws from the 'sample' RNG stream; without one (plain evaluation) it uses
  a fixed key, so evaluation is deterministic.
  """
  # Released as its discriminator: what `open_model` gives for a run of it
  # (bertjax.checkpoints.record), its params cut by `release`.
  RELEASED_AS: ClassVar[str] = "ElectraForPreTraining"
  config: ElectraConfig

  @staticmethod
  def release(params: dict) -> dict:
    return discriminator_params(params)

  def setup(self):
    self.networks()
    self.discriminator_head = DiscriminatorHead(self.config)

  def networks(self):
    """(In setup) the shared embeddings, the generator with its head, and the
    discriminator's encoder."""
    cfg = self.config
    self.embeddings = text_embeddings(cfg)
    self.generator = ElectraModel(cfg.generator_config(), shared_embeddings=self.embeddings)
    self.generator_head = generator_head(cfg.generator_config())
    self.discriminator = ElectraModel(cfg, shared_embeddings=self.embeddings)

  def corrupt(self, input_ids, attention_mask, token_type_ids, position_ids, segment_ids,
              mlm_targets, mlm_weights, masked_positions, *, deterministic: bool,
              output_hidden_states: bool):
    """The generator's pass, its sampled replacements and the discriminator encoder's pass
    over them: (its outputs + `generator_logits`, `replaced`, `corrupted_ids`)."""
    gen = self.generator(input_ids, attention_mask, token_type_ids, position_ids, segment_ids,
                         deterministic=deterministic)
    gen_logits = self.generator_head(gen["last_hidden_state"], self.embeddings.word_embeddings,
                                     masked_positions)
    if mlm_weights is None:
      mlm_weights = jnp.zeros(input_ids.shape, jnp.float32)
    if mlm_targets is None:
      mlm_targets = input_ids
    key = self.make_rng("sample") if self.has_rng("sample") else jax.random.PRNGKey(0)
    corrupted, replaced = sample_replacements(key, gen_logits, input_ids, mlm_targets,
                                              mlm_weights, masked_positions)
    out = self.discriminator(corrupted, attention_mask, token_type_ids, position_ids, segment_ids,
                             deterministic=deterministic,
                             output_hidden_states=output_hidden_states)
    out.update(generator_logits=gen_logits, replaced=replaced, corrupted_ids=corrupted)
    return out

  def __call__(self, input_ids, attention_mask=None, token_type_ids=None, position_ids=None,
               segment_ids=None, mlm_targets=None, mlm_weights=None, masked_positions=None, *,
               deterministic: bool = True, output_hidden_states: bool = False) -> dict:
    out = self.corrupt(input_ids, attention_mask, token_type_ids, position_ids, segment_ids,
                       mlm_targets, mlm_weights, masked_positions, deterministic=deterministic,
                       output_hidden_states=output_hidden_states)
    return self.heads(out, masked_positions)

  def heads(self, out: dict, masked_positions=None) -> dict:
    """The discriminator encoder's outputs + what its head(s) read from them (a head scored
    only at the masked positions may run only at `masked_positions`)."""
    out["discriminator_logits"] = self.discriminator_head(out["last_hidden_state"])
    return out


# --------------------------------------------------------------------------- parameter surgery
def discriminator_params(params: dict) -> dict:
  """ElectraForPreTraining params (HF layout) from ElectraGeneratorDiscriminator params:
  the shared embeddings + the discriminator network + its head. For fine-tuning export."""
  return {"electra": {"embeddings": params["embeddings"], **params["discriminator"]},
          "discriminator_head": params["discriminator_head"]}


def generator_params(params: dict) -> dict:
  """ElectraForMaskedLM params from ElectraGeneratorDiscriminator params."""
  return {"electra": {"embeddings": params["embeddings"], **params["generator"]},
          "generator_head": params["generator_head"]}


def discriminator_from_generator(params: dict) -> dict:
  """Two-stage ELECTRA: a copy of `params` whose discriminator encoder starts from the
  (stage-one) generator's weights. Needs generator_fraction = 1.0 (equal sizes)."""
  gen, disc = params["generator"], params["discriminator"]
  shapes = lambda tree: jax.tree.map(jnp.shape, tree)
  if shapes(gen) != shapes(disc):
    raise ValueError("discriminator_from_generator needs a generator as large as the "
                     "discriminator: train stage one with generator_fraction = 1.0.")
  return {**params, "discriminator": jax.tree.map(lambda x: x, gen)}
