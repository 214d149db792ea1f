"""Encoder-decoder recipes: T5's objectives and BART's denoising.

  t5_span_corruption   T5's objective: 15% noise in spans of mean length 3
  t5_<variant>         every T5 paper variant of `span_corruption.PAPER_VARIANTS`
                       (t5_prefix_lm, t5_bert_style, t5_deshuffling, t5_mass_style,
                       t5_iid_replace_spans, t5_iid_drop_tokens,
                       t5_corruption_rate_{10,15,25,50}, t5_span_length_{2,3,5,10})
  bart_denoising       BART: sentence permutation + Poisson(3) text infilling (30%)

All are dynamic (new noise each epoch) and read `{'text'}` documents, split into
sentences by `sentence_split` (BART permutes those sentences). T5 sentinels are the top
`vocab.extra_ids` ids (or, for a vocabulary without extra ids, its last 100 ids, as the
original T5 code appropriated them); EOS falls back to [SEP] and BOS to [CLS] for
vocabularies without them.

  ds = recipes.get_dataset('t5_span_corruption', sequence_length=512)  # 568 raw -> 512/114
"""
import functools
from typing import Mapping

import gin
import tensorflow as tf

from bertjax import batch
from bertjax.data import feature_converters as fc
from bertjax.data.preprocessors import denoising, pairs, span_corruption
from bertjax.data.recipes import registry, roles

_SEQ2SEQ_FEATURES = batch.task_features(batch.SOURCE_TARGET)


def flatten_sentences(dataset: tf.data.Dataset) -> tf.data.Dataset:
  """`sentences` [s, None] -> `targets` [n] plus `sentence_ids` [n] (index per token)."""
  def fn(ex):
    sentences = ex["sentences"]
    return {"targets": sentences.flat_values,
            "sentence_ids": tf.cast(sentences.value_rowids(), tf.int32)}
  return dataset.map(fn, num_parallel_calls=tf.data.AUTOTUNE)


def sentence_tokens(vocab, sentence_split: str) -> list:
  """Tokenize documents into sentences, then flatten them (with each token's sentence)."""
  return [functools.partial(pairs.tokenize_sentences, vocabulary=vocab,
                            sentence_split=sentence_split), flatten_sentences]


# --------------------------------------------------------------------------- T5
@gin.configurable
def t5_preprocessors(vocab, variant: str = "span_corruption", sentence_split: str = "newline",
                     **overrides):
  """Tokenize, then the T5 objective `variant` (a PAPER_VARIANTS key); `overrides`
  reach `span_corruption.denoise_example` (e.g. noise_density)."""
  first_sentinel = vocab.vocab_size - 1
  return sentence_tokens(vocab, sentence_split) + [functools.partial(
      span_corruption.paper_variant(variant), first_sentinel_id=first_sentinel,
      num_sentinels=getattr(vocab, "extra_ids", 0) or 100,
      eos_id=roles.role(vocab, "eos", "sep"), **overrides)]


def t5_lengths(sequence_length, variant: str = "span_corruption") -> Mapping[str, int]:
  """{'inputs', 'targets'}: random-span variants get T5's matching targets length."""
  if isinstance(sequence_length, Mapping):
    return dict(sequence_length)
  spec = span_corruption.PAPER_VARIANTS[variant]
  if spec["objective"] != "span_corruption":
    return {"inputs": sequence_length, "targets": sequence_length}
  _, targets = span_corruption.random_spans_lengths(
      sequence_length, spec["noise_density"], spec["mean_noise_span_length"])
  return {"inputs": sequence_length, "targets": targets}


def _seq2seq_converter(start_role: str):
  def make(vocab, pack):
    pad = getattr(vocab, "pad_id", None) or 0
    start = pad if start_role == "pad" else roles.role(vocab, "eos", "sep")
    return fc.EncDecFeatureConverter(pack=pack, pad_id=pad, decoder_start_token_id=start)
  return make


for _variant in span_corruption.PAPER_VARIANTS:
  registry.register(
      f"t5_{_variant}", functools.partial(t5_preprocessors, variant=_variant),
      _SEQ2SEQ_FEATURES, _seq2seq_converter("pad"),
      sequence_lengths=functools.partial(t5_lengths, variant=_variant))


# ------------------------------------------------------------------------- BART
@gin.configurable
def bart_preprocessors(vocab, mask_ratio: float = 0.3, poisson_lambda: float = 3.0,
                       permute: bool = True, rotate: bool = False, delete_ratio: float = 0.0,
                       sentence_split: str = "newline"):
  """Tokenize into sentences, then BART noising (inputs noised, targets the text)."""
  return sentence_tokens(vocab, sentence_split) + [functools.partial(
      denoising.bart_denoise, mask_id=roles.role(vocab, "mask"), sentence_key="sentence_ids",
      mask_ratio=mask_ratio, poisson_lambda=poisson_lambda, permute=permute, rotate=rotate,
      delete_ratio=delete_ratio, bos_id=roles.role(vocab, "bos", "cls"),
      eos_id=roles.role(vocab, "eos", "sep"))]


def _same_lengths(sequence_length) -> Mapping[str, int]:
  if isinstance(sequence_length, Mapping):
    return dict(sequence_length)
  return {"inputs": sequence_length, "targets": sequence_length}


registry.register("bart_denoising", bart_preprocessors, _SEQ2SEQ_FEATURES,
                  _seq2seq_converter("eos"), sequence_lengths=_same_lengths)
