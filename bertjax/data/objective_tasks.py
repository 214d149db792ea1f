"""T5, BART and XLNet pretraining objectives, registered with `bertjax.data.tasks`.

  t5_span_corruption   T5's objective: 15% noise in spans of mean length 3
  t5_<variant>         every T5 paper variant of `span_corruption.PAPER_VARIANTS`
                       (t5_prefix_lm, t5_bert_style, t5_deshuffling, t5_mass_style,
                       t5_iid_replace_spans, t5_iid_drop_tokens,
                       t5_corruption_rate_{10,15,25,50}, t5_span_length_{2,3,5,10})
  bart_denoising       BART: sentence permutation + Poisson(3) text infilling (30%)
  xlnet_plm            XLNet permutation LM (span-based partial prediction) over
                       per-row document streams: row r of batch t+1 continues row r
                       of batch t, for the memory carried between train steps

All are dynamic (new noise each epoch) and read `{'text'}` documents, split
into sentences by `sentence_split` (BART permutes those sentences). The special
ids come from the vocabulary's roles: T5 sentinels are the top
`vocab.extra_ids` ids (or, for a vocabulary without extra ids, its last 100
ids, as the original T5 code appropriated them); EOS falls back to [SEP] and
BOS to [CLS] for vocabularies without them.

  ds = tasks.get_dataset('t5_span_corruption', sequence_length=512)  # 568 raw -> 512/114
  ds = tasks.get_dataset('xlnet_plm', sequence_length={'input_ids': 512, 'target_ids': 85})
"""
import functools
from typing import Mapping, Optional

import gin
import tensorflow as tf

from bertjax.data import feature_converters as fc
from bertjax.data import tasks
from bertjax.data.preprocessors import denoising
from bertjax.data.preprocessors import pairs
from bertjax.data.preprocessors import permutation
from bertjax.data.preprocessors import span_corruption

_configurable = functools.partial(gin.configurable, module="bertjax.data.objective_tasks")
_SEQ2SEQ_FEATURES = {"inputs": (tf.int32, 1), "targets": (tf.int32, 1)}
_XLNET_FEATURES = {"input_ids": (tf.int32, 1), "token_type_ids": (tf.int32, 1),
                   "perm_mask": (tf.float32, 2), "target_mapping": (tf.float32, 2),
                   "target_ids": (tf.int32, 1), "target_weights": (tf.float32, 1)}


def _role(vocab, *roles: str) -> int:
  """The id of the first role `vocab` has, e.g. _role(v, 'eos', 'sep')."""
  for role in roles:
    found = getattr(vocab, f"{role}_id", None)
    if found is not None:
      return found
  raise ValueError(f"Vocabulary {type(vocab).__name__} has no id for any of {roles}; use "
                   "bertjax.data.vocabularies or hf_vocabulary.vocab_from_hf.")


def flatten_sentences(dataset: tf.data.Dataset) -> tf.data.Dataset:
  """`sentences` [s, None] -> `targets` [n] plus `sentence_ids` [n] (index per token)."""
  def fn(ex):
    sentences = ex["sentences"]
    return {"targets": sentences.flat_values,
            "sentence_ids": tf.cast(sentences.value_rowids(), tf.int32)}
  return dataset.map(fn, num_parallel_calls=tf.data.AUTOTUNE)


def _tokenize(vocab, sentence_split: str) -> list:
  return [functools.partial(pairs.tokenize_sentences, vocabulary=vocab,
                            sentence_split=sentence_split), flatten_sentences]


# --------------------------------------------------------------------------- T5
@_configurable
def t5_preprocessors(vocab, variant: str = "span_corruption", sentence_split: str = "newline",
                     **overrides):
  """Tokenize, then the T5 objective `variant` (a PAPER_VARIANTS key); `overrides`
  reach `span_corruption.denoise_example` (e.g. noise_density)."""
  first_sentinel = vocab.vocab_size - 1
  return _tokenize(vocab, sentence_split) + [functools.partial(
      span_corruption.paper_variant(variant), first_sentinel_id=first_sentinel,
      num_sentinels=getattr(vocab, "extra_ids", 0) or 100, eos_id=_role(vocab, "eos", "sep"),
      **overrides)]


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
    start = pad if start_role == "pad" else _role(vocab, "eos", "sep")
    return fc.EncDecFeatureConverter(pack=pack, pad_id=pad, decoder_start_token_id=start)
  return make


for _variant in span_corruption.PAPER_VARIANTS:
  tasks.register_objective(
      f"t5_{_variant}", functools.partial(t5_preprocessors, variant=_variant),
      _SEQ2SEQ_FEATURES, _seq2seq_converter("pad"),
      sequence_lengths=functools.partial(t5_lengths, variant=_variant))


# ------------------------------------------------------------------------- BART
@_configurable
def bart_preprocessors(vocab, mask_ratio: float = 0.3, poisson_lambda: float = 3.0,
                       permute: bool = True, rotate: bool = False, delete_ratio: float = 0.0,
                       sentence_split: str = "newline"):
  """Tokenize into sentences, then BART noising (inputs noised, targets the text)."""
  return _tokenize(vocab, sentence_split) + [functools.partial(
      denoising.bart_denoise, mask_id=_role(vocab, "mask"), sentence_key="sentence_ids",
      mask_ratio=mask_ratio, poisson_lambda=poisson_lambda, permute=permute, rotate=rotate,
      delete_ratio=delete_ratio, bos_id=_role(vocab, "bos", "cls"),
      eos_id=_role(vocab, "eos", "sep"))]


def _same_lengths(sequence_length) -> Mapping[str, int]:
  if isinstance(sequence_length, Mapping):
    return dict(sequence_length)
  return {"inputs": sequence_length, "targets": sequence_length}


tasks.register_objective("bart_denoising", bart_preprocessors, _SEQ2SEQ_FEATURES,
                         _seq2seq_converter("eos"), sequence_lengths=_same_lengths)


# ------------------------------------------------------------------------ XLNet
@_configurable
def xlnet_preprocessors(vocab, batch_size: int, reuse_len: Optional[int] = None,
                        mask_alpha: int = 6, mask_beta: int = 1, max_span_length: int = 5,
                        order: str = "token", sentence_split: str = "newline"):
  """Tokenize, then XLNet's permutation-LM features over `batch_size` row streams
  that advance `reuse_len` tokens per step (None: half the sequence, XLNet's 256 of
  512); num_predict from the lengths."""
  return _tokenize(vocab, sentence_split) + [functools.partial(
      permutation.xlnet_plm, sep_id=_role(vocab, "sep"), cls_id=_role(vocab, "cls"),
      pad_id=_role(vocab, "pad"), batch_size=batch_size, reuse_len=reuse_len,
      mask_alpha=mask_alpha, mask_beta=mask_beta, max_span_length=max_span_length,
      order=order)]


@_configurable
def xlnet_lengths(sequence_length, predict_fraction: float = 1 / 6) -> Mapping[str, int]:
  """{'input_ids': L, 'target_ids': num_predict}; XLNet: 512 -> 85 (about L / 6)."""
  if isinstance(sequence_length, Mapping):
    return dict(sequence_length)
  return {"input_ids": sequence_length,
          "target_ids": max(1, int(sequence_length * predict_fraction))}


def _xlnet_converter(vocab, pack):
  return fc.XLNetFeatureConverter(pad_id=_role(vocab, "pad"), pack=pack)


tasks.register_objective("xlnet_plm", xlnet_preprocessors, _XLNET_FEATURES, _xlnet_converter,
                         sequence_lengths=xlnet_lengths, pack=False, row_streams=True)


# ------------------------------------------------------------------ causal LM (GPT)
@_configurable
def causal_lm_preprocessors(vocab, cross_documents: bool = True,
                            sentence_split: str = "newline"):
  """GPT / BERT Table 5's LTR: contiguous [CLS] sentences ... [SEP] blocks, no masking;
  the objective (bertjax.objectives.causal_lm) predicts each next token."""
  return [functools.partial(pairs.tokenize_sentences, vocabulary=vocab,
                            sentence_split=sentence_split),
          functools.partial(pairs.full_sentences, cls_id=_role(vocab, "cls"),
                            sep_id=_role(vocab, "sep"), cross_documents=cross_documents)]


def _causal_lm_converter(vocab, pack):
  return fc.EncoderFeatureConverter(pack=pack, mlm=False, pad_id=_role(vocab, "pad"))


tasks.register_objective("causal_lm", causal_lm_preprocessors,
                         {"input_ids": (tf.int32, 1), "token_type_ids": (tf.int32, 1)},
                         _causal_lm_converter, pack=False)
