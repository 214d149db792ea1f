"""Encoder recipes: BERT, ALBERT, RoBERTa, SpanBERT, ELECTRA.

  bert_mlm_nsp   SEGMENT-PAIR + NSP, static masking (dupe_factor copies)  BERT
  bert_mlm       the same segment pairs, B always the text after A, no NSP
                 label (BERT Table 5's "No NSP")
  bert_mlm_nsp_dynamic  bert_mlm_nsp drawn anew every epoch (RoBERTa Table 1's dynamic
                 masking; `bert_preprocessors.unit = 'sentence'`: Table 2's SENTENCE-PAIR)
  albert_mlm_sop segment pairs + sentence-order prediction, static       ALBERT
  roberta_mlm    FULL-SENTENCES, dynamic masking                          RoBERTa
  spanbert       DOC-SENTENCES single segments, span masking + SBO       SpanBERT
  electra        segments without NSP, dynamic [MASK] 85% / keep 15%     ELECTRA
                 (the generator's sampling happens in the model)
"""
import functools

import gin

from bertjax import batch
from bertjax.data import feature_converters as fc
from bertjax.data.preprocessors import masking, pairs, span_masking
from bertjax.data.recipes import registry, roles

_MLM_FEATURES = batch.task_features(batch.TOKENS + batch.MLM)
_NSP_FEATURES = batch.task_features(batch.TOKENS + batch.MLM + batch.SENTENCE_PAIR)
_SBO_FEATURES = batch.task_features(batch.TOKENS + batch.MLM + batch.SPAN_BOUNDARY)


def _mlm(vocab, whole_word: bool, **kwargs) -> registry.Preprocessor:
  ids = roles.special_ids(vocab)
  return functools.partial(
      masking.mlm_mask, mask_id=ids["mask"], vocab_size=ids["vocab_size"],
      special_ids=ids["special"], is_continuation=roles.word_continuations(vocab) if whole_word
      else None, **kwargs)


def _tokenize(vocab, sentence_split: str) -> registry.Preprocessor:
  return functools.partial(pairs.tokenize_sentences, vocabulary=vocab,
                           sentence_split=sentence_split)


@gin.configurable
def bert_preprocessors(vocab, objective: str = "nsp", dupe_factor: int = 10,
                       short_seq_prob: float = 0.1, rate: float = 0.15,
                       whole_word: bool = False, sentence_split: str = "newline",
                       unit: str = "segment"):
  """BERT create_pretraining_data: segment pairs (+NSP or SOP), static masking; `unit`
  'sentence' pairs single sentences (RoBERTa's SENTENCE-PAIR)."""
  ids = roles.special_ids(vocab)
  return [_tokenize(vocab, sentence_split),
          functools.partial(masking.duplicate_examples, dupe_factor=dupe_factor),
          functools.partial(pairs.sentence_pairs, cls_id=ids["cls"], sep_id=ids["sep"],
                            objective=objective, short_seq_prob=short_seq_prob, unit=unit),
          _mlm(vocab, whole_word, rate=rate)]


@gin.configurable
def roberta_preprocessors(vocab, cross_documents: bool = True, rate: float = 0.15,
                          whole_word: bool = False, sentence_split: str = "newline"):
  """RoBERTa FULL-SENTENCES (or DOC-SENTENCES) with dynamic masking."""
  ids = roles.special_ids(vocab)
  return [_tokenize(vocab, sentence_split),
          functools.partial(pairs.full_sentences, cls_id=ids["cls"], sep_id=ids["sep"],
                            cross_documents=cross_documents),
          _mlm(vocab, whole_word, rate=rate)]


@gin.configurable
def spanbert_preprocessors(vocab, rate: float = 0.15, geometric_p: float = 0.2,
                           max_span_words: int = 10, sentence_split: str = "newline"):
  """SpanBERT: single contiguous segments of one document, span masking + SBO."""
  ids = roles.special_ids(vocab)
  return [_tokenize(vocab, sentence_split),
          functools.partial(pairs.full_sentences, cls_id=ids["cls"], sep_id=ids["sep"],
                            cross_documents=False),
          functools.partial(span_masking.span_mask, mask_id=ids["mask"],
                            vocab_size=ids["vocab_size"], special_ids=ids["special"],
                            rate=rate, geometric_p=geometric_p,
                            max_span_words=max_span_words,
                            is_continuation=roles.word_continuations(vocab))]


@gin.configurable
def electra_preprocessors(vocab, rate: float = 0.15, mask_prob: float = 0.85,
                          short_seq_prob: float = 0.1, sentence_split: str = "newline"):
  """ELECTRA: [CLS] A [SEP] B [SEP] segments without NSP; 85% [MASK], 15% kept."""
  ids = roles.special_ids(vocab)
  return [_tokenize(vocab, sentence_split),
          functools.partial(pairs.sentence_pairs, cls_id=ids["cls"], sep_id=ids["sep"],
                            objective=None, short_seq_prob=short_seq_prob),
          _mlm(vocab, False, rate=rate, mask_prob=mask_prob, random_prob=0.0)]


def _encoder_converter(nsp: bool = False, sbo: bool = False):
  def make(vocab, pack):
    return fc.EncoderFeatureConverter(pack=pack, nsp=nsp, sbo=sbo,
                                      pad_id=roles.special_ids(vocab)["pad"])
  return make


registry.register("bert_mlm_nsp", bert_preprocessors, _NSP_FEATURES,
                  _encoder_converter(nsp=True), static=True, pack=False)
registry.register("bert_mlm", functools.partial(bert_preprocessors, objective=None),
                  _MLM_FEATURES, _encoder_converter(), static=True, pack=False)
registry.register("bert_mlm_nsp_dynamic", functools.partial(bert_preprocessors, dupe_factor=1),
                  _NSP_FEATURES, _encoder_converter(nsp=True), pack=False)
registry.register("albert_mlm_sop", functools.partial(bert_preprocessors, objective="sop"),
                  _NSP_FEATURES, _encoder_converter(nsp=True), static=True, pack=False)
registry.register("roberta_mlm", roberta_preprocessors, _MLM_FEATURES, _encoder_converter())
registry.register("spanbert", spanbert_preprocessors, _SBO_FEATURES,
                  _encoder_converter(sbo=True))
registry.register("electra", electra_preprocessors, _MLM_FEATURES, _encoder_converter())
