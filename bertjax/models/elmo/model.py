"""ELMo (Peters et al., 2018): a character-CNN, 2-layer bidirectional LSTM language model.

  char ids [B, L, C] -> CharacterEncoder (char_cnn.py) -> word vectors x [B, L, P]
    -> BiLstmStack (lstm.py): forward and backward LSTMs with projections, residual
       connections between layers
    -> forward / backward next-word logits through ONE shared softmax over the word
       vocabulary (the two directions share the token representation and softmax,
       and nothing else)

Outputs: `hidden_states` [num_layers + 1, B, L, 2P], ELMo's representations per
layer (layer 0 is the context-free x twice, [x; x], so every layer has the same width;
layer k is [forward_k; backward_k]) - what a task's scalar mix reads; and, unless
`with_logits=False`, `forward_logits` / `backward_logits` [B, L, V]: position t of the
forward LM scores word t + 1, of the backward LM word t - 1 (objectives/bilm.py).

Logical axis names: batch, length, embed (the projection width P), mlp (LSTM cells),
gates (the 4 LSTM gates), vocab (words), char_vocab, char_embed, conv_width, filters /
filters_out (the CNN's concatenated filters); DEFAULT_RULES shard mlp and vocab over
`model`, the others are replicated unless a rule names them.
"""
import dataclasses
from typing import Optional

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from bertjax import characters
from bertjax.models.elmo.char_cnn import CharacterEncoder
from bertjax.models.elmo.lstm import BiLstmStack

# The released model's character CNN (options.json of the "Original" ELMo).
PAPER_FILTERS = ((1, 32), (2, 32), (3, 64), (4, 128), (5, 256), (6, 512), (7, 1024))


@dataclasses.dataclass(frozen=True)
class ElmoConfig:
  vocab_size: int = 793471           # the word softmax (the 1B Word Benchmark's vocabulary)
  char_vocab_size: int = characters.VOCAB_SIZE
  max_characters_per_word: int = characters.MAX_CHARACTERS
  char_embed_dim: int = 16
  filters: tuple = PAPER_FILTERS     # (width, number) per convolution
  num_highway: int = 2
  projection_dim: int = 512
  cell_size: int = 4096
  num_layers: int = 2
  cell_clip: Optional[float] = 3.0
  proj_clip: Optional[float] = 3.0
  hidden_dropout: float = 0.1
  initializer_range: float = 0.02
  dtype: str = "float32"  # compute dtype; parameters are always float32

  def __post_init__(self):
    object.__setattr__(self, "filters", tuple(tuple(int(v) for v in f) for f in self.filters))
    widest = max((w for w, _ in self.filters), default=0)
    if not self.filters or widest > self.max_characters_per_word:
      raise ValueError(f"ElmoConfig.filters={self.filters}: give at least one (width, number) "
                       f"pair, none wider than max_characters_per_word="
                       f"{self.max_characters_per_word}.")
    if self.char_vocab_size < characters.VOCAB_SIZE:
      raise ValueError(f"ElmoConfig.char_vocab_size={self.char_vocab_size} is smaller than the "
                       f"character vocabulary ({characters.VOCAB_SIZE} ids: padding, 256 bytes, "
                       f"5 marks); the embedding needs a row for each.")
    if self.max_characters_per_word < 3:
      raise ValueError(f"ElmoConfig.max_characters_per_word={self.max_characters_per_word}: "
                       f"a word needs its begin / end marks and a byte (>= 3).")

  @property
  def num_filters(self) -> int:
    return sum(n for _, n in self.filters)

  def replace(self, **changes) -> "ElmoConfig":
    return dataclasses.replace(self, **changes)


def elmo_original(**overrides) -> ElmoConfig:
  """The paper's model: 2048 char filters, 2 highway layers, 4096 cells -> 512 projections."""
  return ElmoConfig(**overrides)


def elmo_small(**overrides) -> ElmoConfig:
  """A CPU-pretrainable ELMo: the paper's filter widths with 1/8 of the filters (256),
  2 highway layers, 512-cell LSTMs projected to 64, an 8k-word softmax."""
  values = dict(vocab_size=8004, filters=tuple((w, n // 8) for w, n in PAPER_FILTERS),
                projection_dim=64, cell_size=512)
  return ElmoConfig(**{**values, **overrides})


def elmo_tiny(**overrides) -> ElmoConfig:
  """For tests: 3 small filter widths, 64 cells -> 16, a 100-word softmax."""
  values = dict(vocab_size=100, char_embed_dim=4, filters=((1, 4), (2, 4), (3, 8)),
                projection_dim=16, cell_size=64, hidden_dropout=0.0)
  return ElmoConfig(**{**values, **overrides})


SIZES = {"original": elmo_original, "small": elmo_small, "tiny": elmo_tiny}


class ElmoBiLM(nn.Module):
  """The bidirectional LM: char ids [B, L, C] (+ optional attention_mask [B, L])."""
  config: ElmoConfig

  @nn.compact
  def __call__(self, char_ids: jax.Array, attention_mask: Optional[jax.Array] = None, *,
               deterministic: bool = True, with_logits: bool = True) -> dict:
    cfg = self.config
    if char_ids.ndim != 3:
      raise ValueError(f"ElmoBiLM takes char_ids [batch, words, characters]; got shape "
                       f"{char_ids.shape}.")
    if not isinstance(char_ids, jax.core.Tracer):  # concrete inputs: check the ids too
      characters.check_ids(np.asarray(char_ids), cfg.char_vocab_size,
                           cfg.max_characters_per_word)
    elif char_ids.shape[-1] != cfg.max_characters_per_word:
      characters.check_ids(np.zeros(char_ids.shape[-1:], np.int32), cfg.char_vocab_size,
                           cfg.max_characters_per_word)
    dtype = jnp.dtype(cfg.dtype)
    mask = (char_ids > 0).any(-1) if attention_mask is None else attention_mask.astype(bool)
    words = CharacterEncoder(cfg.char_vocab_size, cfg.char_embed_dim, cfg.filters,
                             cfg.num_highway, cfg.projection_dim, cfg.initializer_range, dtype,
                             name="characters")(char_ids)
    words = jnp.where(mask[..., None], words, 0.0)
    dropped = nn.Dropout(cfg.hidden_dropout)(words, deterministic=deterministic)
    layers = BiLstmStack(cfg.num_layers, cfg.cell_size, cfg.projection_dim, cfg.cell_clip,
                         cfg.proj_clip, cfg.hidden_dropout, cfg.initializer_range, dtype,
                         name="lstm")(dropped, mask, deterministic=deterministic)
    states = [jnp.concatenate([words, words], -1)] + [jnp.concatenate(l, -1) for l in layers]
    outputs = {"hidden_states": jnp.stack(states), "attention_mask": mask.astype(jnp.int32)}
    if with_logits:
      softmax = self.param("softmax_kernel", nn.with_logical_partitioning(
          nn.initializers.normal(cfg.initializer_range), ("embed", "vocab")),
                           (cfg.projection_dim, cfg.vocab_size), jnp.float32).astype(dtype)
      bias = self.param("softmax_bias", nn.with_logical_partitioning(
          nn.initializers.zeros, ("vocab",)), (cfg.vocab_size,), jnp.float32).astype(dtype)
      top_forward, top_backward = layers[-1]
      for name, top in (("forward_logits", top_forward), ("backward_logits", top_backward)):
        top = nn.Dropout(cfg.hidden_dropout)(top, deterministic=deterministic)
        logits = jnp.einsum("blp,pv->blv", top, softmax) + bias
        outputs[name] = nn.with_logical_constraint(logits, ("batch", "length", "vocab"))
    return outputs


def init_params(module: ElmoBiLM, rng: jax.Array, batch_size: int = 1, length: int = 4,
                boxed: bool = False):
  """Random parameters of an ELMo module (softmax included)."""
  chars = jnp.ones((batch_size, length, module.config.max_characters_per_word), jnp.int32)
  variables = module.init(rng, chars)
  return variables["params"] if boxed else nn.unbox(variables["params"])


def check_params(config: ElmoConfig, params, source: str = "params") -> None:
  """Fails naming every tensor whose shape disagrees with `config` (e.g. an LSTM
  checkpoint of another size), with both shapes; softmax-free params are accepted."""
  expected = jax.eval_shape(lambda: init_params(ElmoBiLM(config), jax.random.key(0)))
  flat_expected = {"/".join(str(getattr(k, "key", k)) for k in path): tuple(leaf.shape)
                   for path, leaf in jax.tree_util.tree_leaves_with_path(expected)}
  flat_given = {"/".join(str(getattr(k, "key", k)) for k in path): tuple(np.shape(leaf))
                for path, leaf in jax.tree_util.tree_leaves_with_path(params)}
  problems = [f"{k}: {source} has {flat_given[k]}, ElmoConfig expects {shape}"
              for k, shape in flat_expected.items() if k in flat_given and flat_given[k] != shape]
  missing = [k for k in flat_expected if k not in flat_given and not k.startswith("softmax")]
  extra = [k for k in flat_given if k not in flat_expected]
  if problems or missing or extra:
    raise ValueError(f"{source} do not fit this ElmoConfig (projection_dim="
                     f"{config.projection_dim}, cell_size={config.cell_size}, num_layers="
                     f"{config.num_layers}, filters={config.filters}): "
                     + "; ".join(problems + [f"missing {k}" for k in missing]
                                 + [f"unexpected {k}" for k in extra])
                     + ". Build the model with the config the weights were trained with.")
