"""T5 denoising objectives: span corruption and the paper's Table 3-6 variants.

Every objective maps one token sequence `x` to an `inputs` / `targets` pair:

  objective          noise mask                inputs                  targets
  span_corruption    random spans (15%, mean 3) span -> one sentinel    sentinel + span, ...
  iid_replace_spans  i.i.d. tokens             run -> one sentinel     sentinel + run, ...
  iid_drop_tokens    i.i.d. tokens             noise dropped           the dropped tokens
  bert_style         i.i.d. tokens             80% mask/10% rand/10%   x
  mass_style         i.i.d. tokens             noise -> mask           x
  deshuffling        -                         shuffled x              x
  prefix_lm          random prefix             the prefix              the rest

Sentinels count down from the top of the vocabulary, as T5's extra ids do:
the k-th noise span of an example gets `first_sentinel_id - k`
(`first_sentinel_id = vocab_size - 1` is `<extra_id_0>`). Targets are aligned
with inputs: `sentinel_k` precedes span k in both, and a final sentinel closes
the targets when `x` ends with kept text - for random spans this is exactly
T5's output. All ids are explicit arguments, so any vocabulary works.

Short documents: empty sequences are dropped by the dataset wrappers (and
counted in `stats` as 't5/dropped_empty_document'); a
one-token sequence gets no noise (T5's rule: the noise count is clipped to
[1, length - 1] on a length of at least 2, and the mask is cut back to 1).
"""
import functools
from typing import Mapping, Optional, Sequence

import numpy as np
import tensorflow as tf

from bertjax.data.preprocessors import seeding
from bertjax.data.preprocessors import stats

OBJECTIVES = ('span_corruption', 'iid_replace_spans', 'iid_drop_tokens',
              'bert_style', 'mass_style', 'deshuffling', 'prefix_lm')

# The objective variants of the T5 paper (Raffel et al. 2020): Table 3
# (high-level objectives), Table 4 (BERT-style simplifications), Table 5
# (corruption rates, with i.i.d. replace spans) and Table 6 (span lengths).
PAPER_VARIANTS: Mapping[str, dict] = {
    'prefix_lm': dict(objective='prefix_lm'),
    'bert_style': dict(objective='bert_style', noise_density=0.15),
    'deshuffling': dict(objective='deshuffling'),
    'mass_style': dict(objective='mass_style', noise_density=0.15),
    'iid_replace_spans': dict(objective='iid_replace_spans', noise_density=0.15),
    'iid_drop_tokens': dict(objective='iid_drop_tokens', noise_density=0.15),
    **{f'corruption_rate_{round(r * 100)}': dict(objective='iid_replace_spans',
                                                 noise_density=r)
       for r in (0.10, 0.15, 0.25, 0.50)},
    **{f'span_length_{n}': dict(objective='span_corruption', noise_density=0.15,
                                mean_noise_span_length=float(n))
       for n in (2, 3, 5, 10)},
    'span_corruption': dict(objective='span_corruption', noise_density=0.15,
                            mean_noise_span_length=3.0),
}


# ------------------------------------------------------------------ masks ---
def random_spans_noise_mask(length, seed, noise_density: float = 0.15,
                            mean_noise_span_length: float = 3.0) -> tf.Tensor:
  """bool[length]: alternating kept / noise spans, starting with kept text.

  The counts are fixed, only the layout is random:
  noise tokens = round(length * density) clipped to [1, length - 1], and
  round(noise / mean_span_length) >= 1 noise spans, each paired with a
  preceding non-empty kept span. Given the counts, every layout is equally
  likely (each side is a uniformly random composition into positive parts).
  """
  if noise_density == 0.0:
    return tf.zeros([length], tf.bool)
  orig_length = length
  length = tf.maximum(length, 2)  # so both kinds of span can be non-empty
  num_noise = tf.cast(tf.round(tf.cast(length, tf.float32) * noise_density), tf.int32)
  num_noise = tf.clip_by_value(num_noise, 1, length - 1)
  num_spans = tf.cast(tf.round(tf.cast(num_noise, tf.float32) / mean_noise_span_length),
                      tf.int32)
  num_spans = tf.maximum(num_spans, 1)
  noise_seed, kept_seed = seeding.split_seed(seed, 2)
  noise_lengths = _random_composition(num_noise, num_spans, noise_seed)
  kept_lengths = _random_composition(length - num_noise, num_spans, kept_seed)
  # Span k covers kept_lengths[k] kept tokens, then noise_lengths[k] noise ones.
  span_lengths = tf.reshape(tf.stack([kept_lengths, noise_lengths], axis=1), [-1])
  is_noise_span = tf.tile([False, True], [num_spans])
  return tf.repeat(is_noise_span, span_lengths)[:orig_length]


def _random_composition(total, parts, seed) -> tf.Tensor:
  """int32[parts] of positive integers summing to `total` (uniform)."""
  # Choose parts - 1 of the total - 1 gaps between items as cut points.
  cuts = seeding.shuffle(tf.range(total - 1) < parts - 1, seed)
  part_id = tf.cumsum(tf.cast(tf.concat([[False], cuts], 0), tf.int32))
  return tf.math.bincount(part_id, minlength=parts, maxlength=parts, dtype=tf.int32)


def iid_noise_mask(length, seed, noise_density: float) -> tf.Tensor:
  """bool[length]: each token is noise independently with prob. density."""
  return tf.random.stateless_uniform([length], seed=seed) < noise_density


def random_prefix_mask(length, seed) -> tf.Tensor:
  """bool[length]: True on a prefix whose length is uniform in [1, length-1]."""
  max_prefix = length - 1
  min_prefix = tf.minimum(max_prefix, 1)  # a 1-token text has an empty prefix
  prefix = tf.random.stateless_uniform([], seed=seed, minval=min_prefix,
                                       maxval=max_prefix + 1, dtype=tf.int32)
  return tf.range(length) < prefix


# ------------------------------------------------------------- transforms ---
def _span_starts(noise_mask):
  previous = tf.concat([[False], noise_mask[:-1]], 0)
  return tf.logical_and(noise_mask, tf.logical_not(previous))


def sentinel_inputs(tokens, noise_mask, first_sentinel_id) -> tf.Tensor:
  """Each run of noise tokens -> one sentinel, counting down per run."""
  starts = _span_starts(noise_mask)
  sentinels = first_sentinel_id + 1 - tf.cumsum(tf.cast(starts, tokens.dtype))
  tokens = tf.where(starts, sentinels, tokens)
  return tf.boolean_mask(tokens, tf.logical_or(starts, tf.logical_not(noise_mask)))


def sentinel_targets(tokens, noise_mask, first_sentinel_id) -> tf.Tensor:
  """`sentinel_k run_k` for every noise run, + a closing sentinel if x ends kept."""
  starts = _span_starts(noise_mask)
  num_spans = tf.reduce_sum(tf.cast(starts, tokens.dtype))
  sentinels = first_sentinel_id + 1 - tf.cumsum(tf.cast(starts, tokens.dtype))
  # Interleave [sentinel if a run starts here, token if noise] per position.
  pairs = tf.reshape(tf.stack([sentinels, tokens], axis=1), [-1])
  keep = tf.reshape(tf.stack([starts, noise_mask], axis=1), [-1])
  ends_kept = tf.logical_and(tf.size(tokens) > 0,
                             tf.logical_not(tf.reduce_any(noise_mask[-1:])))
  closing = tf.fill([tf.cast(ends_kept, tf.int32)], first_sentinel_id - num_spans)
  return tf.concat([tf.boolean_mask(pairs, keep), tf.cast(closing, tokens.dtype)], 0)


def bert_style_inputs(tokens, noise_mask, seed, *, mask_id, random_low, random_high,
                      mask_rate: float = 0.8, random_rate: float = 0.1) -> tf.Tensor:
  """Noise tokens -> mask_id (mask_rate), a random id (random_rate), or kept."""
  choice_seed, random_seed = seeding.split_seed(seed, 2)
  u = tf.random.stateless_uniform(tf.shape(tokens), seed=choice_seed)
  random_ids = tf.random.stateless_uniform(
      tf.shape(tokens), seed=random_seed, minval=random_low, maxval=random_high,
      dtype=tf.int32)
  corrupted = tf.where(u < mask_rate, tf.cast(mask_id, tokens.dtype),
                       tf.where(u < mask_rate + random_rate,
                                tf.cast(random_ids, tokens.dtype), tokens))
  return tf.where(noise_mask, corrupted, tokens)


# ------------------------------------------------------------- one example ---
def denoise_example(tokens: tf.Tensor, seed: tf.Tensor, *, objective: str = 'span_corruption',
                    first_sentinel_id: int, num_sentinels: Optional[int] = 100,
                    noise_density: float = 0.15, mean_noise_span_length: float = 3.0,
                    mask_id: Optional[int] = None, mask_rate: float = 0.8,
                    random_rate: float = 0.1, num_reserved_ids: int = 3,
                    eos_id: Optional[int] = None) -> dict:
  """{'inputs', 'targets'} for one int token sequence (see module docstring).

  Args:
    tokens: int[n] token ids (no EOS).
    seed: [2] stateless seed.
    objective: one of OBJECTIVES.
    first_sentinel_id: id of `<extra_id_0>` (T5: vocab_size - 1); later
      sentinels count down from it.
    num_sentinels: how many sentinel ids exist; an example needing more raises
      InvalidArgumentError. Random replacement ids are drawn below them, from
      [num_reserved_ids, first_sentinel_id - num_sentinels + 1).
    mask_id: mask token for bert_style / mass_style (default: first sentinel,
      as T5 does).
    mask_rate, random_rate: BERT-style split of the noise (default 80/10/10).
    eos_id: appended to both inputs and targets when given.
  """
  if objective not in OBJECTIVES:
    raise ValueError(f'Unknown T5 objective {objective!r}; expected one of {OBJECTIVES}.')
  tokens = tf.convert_to_tensor(tokens)
  mask_seed, corrupt_seed = seeding.split_seed(seed, 2)
  length = tf.size(tokens)
  mask_id = first_sentinel_id if mask_id is None else mask_id

  if objective == 'span_corruption':
    noise = random_spans_noise_mask(length, mask_seed, noise_density, mean_noise_span_length)
  elif objective == 'prefix_lm':
    noise = random_prefix_mask(length, mask_seed)
  elif objective == 'deshuffling':
    noise = tf.ones([length], tf.bool)
  else:
    noise = iid_noise_mask(length, mask_seed, noise_density)

  if objective in ('span_corruption', 'iid_replace_spans'):
    if num_sentinels is not None:
      tf.debugging.assert_less_equal(
          tf.reduce_sum(tf.cast(_span_starts(noise), tf.int32)), num_sentinels,
          message=f'{objective}: more noise spans than the {num_sentinels} sentinel ids; '
                  'shorten the sequence or lower the noise density.')
    inputs = sentinel_inputs(tokens, noise, first_sentinel_id)
    targets = sentinel_targets(tokens, noise, first_sentinel_id)
  elif objective in ('iid_drop_tokens', 'prefix_lm'):
    # prefix_lm: the "noise" is the prefix, which becomes the inputs.
    keep_in_inputs = noise if objective == 'prefix_lm' else tf.logical_not(noise)
    inputs = tf.boolean_mask(tokens, keep_in_inputs)
    targets = tf.boolean_mask(tokens, tf.logical_not(keep_in_inputs))
  elif objective == 'deshuffling':
    inputs, targets = seeding.shuffle(tokens, corrupt_seed), tokens
  else:  # bert_style / mass_style: corrupt in place, predict the original.
    rates = (mask_rate, random_rate) if objective == 'bert_style' else (1.0, 0.0)
    random_high = first_sentinel_id + 1 - (num_sentinels or 1)
    if random_high <= num_reserved_ids:
      raise ValueError(f'{objective}: no ids left for random replacement between '
                       f'num_reserved_ids={num_reserved_ids} and the sentinels below '
                       f'first_sentinel_id={first_sentinel_id} (num_sentinels={num_sentinels}).')
    inputs = bert_style_inputs(tokens, noise, corrupt_seed, mask_id=mask_id,
                               random_low=num_reserved_ids, random_high=random_high,
                               mask_rate=rates[0], random_rate=rates[1])
    targets = tokens

  if eos_id is not None:
    eos = tf.constant([eos_id], tokens.dtype)
    inputs, targets = tf.concat([inputs, eos], 0), tf.concat([targets, eos], 0)
  return {'inputs': inputs, 'targets': targets}


# ----------------------------------------------------------------- lengths ---
def random_spans_lengths(inputs_length: int, noise_density: float = 0.15,
                         mean_noise_span_length: float = 3.0,
                         eos: bool = True) -> tuple:
  """(raw tokens per example, targets length) so span-corrupted inputs fill
  exactly `inputs_length` (T5: 512 -> 568 raw tokens, 114 targets)."""
  def lengths(n):  # the counts random_spans_noise_mask uses (float32, clipped)
    noise = int(np.clip(np.round(np.float32(n) * np.float32(noise_density)), 1, n - 1))
    spans = max(int(np.round(np.float32(noise) / np.float32(mean_noise_span_length))), 1)
    return n - noise + spans + int(eos), noise + spans + int(eos)

  n = inputs_length - int(eos)
  while lengths(n + 1)[0] <= inputs_length:
    n += 1
  inputs, targets = lengths(n)
  del inputs
  if noise_density == 0.5 and targets > inputs_length:
    # Keep targets no longer than the (usually round) inputs length.
    n, targets = n - 1, targets - 1
  return n, targets


def raw_tokens_length(objective: str, inputs_length: int, noise_density: float = 0.15,
                      mean_noise_span_length: float = 3.0, eos: bool = True) -> int:
  """Raw tokens per example so an objective's inputs fit `inputs_length`."""
  if objective == 'span_corruption':
    return random_spans_lengths(inputs_length, noise_density, mean_noise_span_length, eos)[0]
  # Every other objective's inputs are at most as long as its raw text.
  return inputs_length - int(eos)


def split_tokens(dataset: tf.data.Dataset, max_tokens: int, key='targets',
                 extra_keys: Sequence[str] = ()) -> tf.data.Dataset:
  """Splits each example's `key` into consecutive chunks of <= max_tokens.

  `extra_keys` (per-token features aligned with `key`) are split alike; other
  features are dropped.
  """
  def to_chunks(example):
    n = tf.size(example[key])
    num_chunks = (n + max_tokens - 1) // max_tokens
    row_lengths = tf.minimum(max_tokens, n - max_tokens * tf.range(num_chunks))
    return tf.data.Dataset.from_tensor_slices({
        k: tf.RaggedTensor.from_row_lengths(example[k], row_lengths)
        for k in (key, *extra_keys)})
  return dataset.flat_map(to_chunks)


# ---------------------------------------------------------------- datasets ---
def drop_short(dataset: tf.data.Dataset, key: str, rule: str, min_tokens: int = 1
               ) -> tf.data.Dataset:
  """Drops examples whose `key` has < min_tokens tokens, counting them in
  `stats` under `rule`."""
  def keep(example):
    ok = tf.size(example[key]) >= min_tokens
    with tf.control_dependencies([stats.count(rule, tf.logical_not(ok))]):
      return tf.identity(ok)
  return dataset.filter(keep)


def t5_denoise(dataset: tf.data.Dataset, sequence_length: Optional[Mapping[str, int]] = None,
               output_features=None, *, objective: str = 'span_corruption',
               first_sentinel_id: int, seed: Optional[int] = None,
               input_key: str = 'targets', **kwargs) -> tf.data.Dataset:
  """seqio preprocessor: tokenized `input_key` -> {'inputs', 'targets'}.

  With `sequence_length['inputs']`, documents are first split into chunks
  sized so the objective's inputs (incl. EOS when `eos_id` is given) fit it.
  Empty documents are dropped. `kwargs` go to `denoise_example`.
  """
  del output_features
  dataset = drop_short(dataset, input_key, rule='t5/dropped_empty_document')
  if sequence_length and sequence_length.get('inputs'):
    max_tokens = raw_tokens_length(
        objective, sequence_length['inputs'], kwargs.get('noise_density', 0.15),
        kwargs.get('mean_noise_span_length', 3.0), eos=kwargs.get('eos_id') is not None)
    dataset = split_tokens(dataset, max_tokens, input_key)
  fn = functools.partial(denoise_example, objective=objective,
                         first_sentinel_id=first_sentinel_id, **kwargs)
  return seeding.map_with_seed(dataset, lambda ex, seed: fn(ex[input_key], seed), seed)


def span_corruption(dataset: tf.data.Dataset, sequence_length=None, output_features=None, *,
                    first_sentinel_id: int, noise_density: float = 0.15,
                    mean_noise_span_length: float = 3.0, **kwargs) -> tf.data.Dataset:
  """T5's pre-training objective (15% noise, mean span 3); see `t5_denoise`."""
  return t5_denoise(dataset, sequence_length, output_features, objective='span_corruption',
                    first_sentinel_id=first_sentinel_id, noise_density=noise_density,
                    mean_noise_span_length=mean_noise_span_length, **kwargs)


def paper_variant(name: str):
  """The seqio preprocessor for a `PAPER_VARIANTS` entry (needs ids as kwargs)."""
  if name not in PAPER_VARIANTS:
    raise ValueError(f'Unknown T5 paper variant {name!r}; expected one of '
                     f'{sorted(PAPER_VARIANTS)}.')
  return functools.partial(t5_denoise, **PAPER_VARIANTS[name])


def sentinel_ids(first_sentinel_id: int, count: int) -> list:
  """The ids of `<extra_id_0>` ... `<extra_id_{count-1}>`."""
  return [first_sentinel_id - k for k in range(count)]

