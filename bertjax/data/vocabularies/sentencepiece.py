"""SentencePiece (ALBERT, XLNet, BigBird, T5, DeBERTa-v3) with HF's added-token splitting."""
import re
from typing import Mapping, Optional, Sequence

import numpy as np
import seqio
import tensorflow as tf
import tokenizers
from sentencepiece import sentencepiece_model_pb2

from bertjax.data import text_rules
from bertjax.data.vocabularies.base import RoleIdsMixin, added_token_pattern

_SP = sentencepiece_model_pb2.ModelProto.SentencePiece
_SP_DEFAULT_ROLES = dict(pad=("<pad>",), unk=("<unk>",), cls=("[CLS]", "<cls>"),
                         sep=("[SEP]", "<sep>"), mask=("[MASK]", "<mask>"), bos=("<s>",),
                         eos=("</s>", "[SEP]", "<sep>"))


class SentencePieceVocabulary(RoleIdsMixin, seqio.SentencePieceVocabulary):
  """ALBERT / XLNet / T5 / BigBird SentencePiece, tokenising as HF's tokenizer does.

  HF's (tokenizers-backed) SentencePiece tokenizers differ from plain sentencepiece:
  added tokens (by default every non-normal piece: control, unknown, user-defined, e.g.
  ALBERT's "(" or "[MASK]") are cut out of the raw text first and each remaining
  segment is tokenised on its own, so "x(y" gives "▁x", "(", "▁y". Each segment is
  normalised as HF does (ALBERT: ``/'' -> ", NFKD + accent stripping, lowercasing),
  then sentencepiece applies the model's own normaliser. Whitespace schemes:
    whitespace_split=True  (ALBERT, XLNet, T5): any whitespace separates words; runs
                           and leading/trailing whitespace vanish.
    whitespace_split=False (BigBird): a run of 2+ spaces is one "▁", every other space
                           a "▁" (so trailing spaces give a "▁" token).
  The python and TF paths run the same steps, so `encode_tf` equals `encode`: the TF path
  normalises in-graph and then calls the same sentencepiece library as the python path
  (tensorflow_text's own copy breaks ties between equally scored segmentations the other
  way: ALBERT's "xbbb" is "x", "b", "bb" in sentencepiece and HF, "x", "bb", "b" there).
  """

  def __init__(self, model_file: str, lower_case: bool = False,
               strip_accents: bool = False, normalize_quotes: bool = False,
               whitespace_split: bool = True, roles: Optional[Mapping[str, str]] = None,
               added_tokens: Optional[Sequence[str]] = None,
               special_tokens: Optional[Sequence[str]] = None, extra_ids: int = 0):
    self._lower_case = lower_case
    self._strip_accents = strip_accents
    self._normalize_quotes = normalize_quotes
    self._whitespace_split = whitespace_split
    overrides = None
    if not whitespace_split:
      overrides = sentencepiece_model_pb2.NormalizerSpec(
          add_dummy_prefix=False, remove_extra_whitespaces=False)
    super().__init__(model_file, extra_ids=extra_ids, normalizer_spec_overrides=overrides)
    model = sentencepiece_model_pb2.ModelProto.FromString(self.sp_model)
    pieces = {p.piece: i for i, p in enumerate(model.pieces)}
    if added_tokens is None:
      added_tokens = [p.piece for p in model.pieces
                      if p.type in (_SP.CONTROL, _SP.UNKNOWN, _SP.USER_DEFINED)]
    if special_tokens is None:
      special_tokens = [p.piece for p in model.pieces
                        if p.type in (_SP.CONTROL, _SP.UNKNOWN)]
    self._added = {t: pieces[t] for t in added_tokens if t in pieces}
    self._special_added = [pieces[t] for t in special_tokens if t in pieces]
    if roles is None:
      roles = {r: next((c for c in cands if c in pieces), None)
               for r, cands in _SP_DEFAULT_ROLES.items()}
    self._roles = {r: pieces[t] for r, t in roles.items() if t in pieces}
    # HF runs the model's own normaliser (its "Precompiled" charsmap) before splitting on
    # whitespace, so a whitespace character that charsmap deletes (nmt_nfkc deletes the
    # vertical tab) joins its neighbours there instead of separating them.
    self._deleted_spaces = "".join(
        c for c in text_rules.WHITESPACE_CHARS
        if whitespace_split and self.tokenizer.Normalize(f"a{c}b") == self.tokenizer.Normalize("ab"))

  @property
  def normalization(self) -> dict:
    """How text is prepared for the model (hf_tokenizer.sentencepiece_tokenizer's flags)."""
    return dict(lower_case=self._lower_case, strip_accents=self._strip_accents,
                normalize_quotes=self._normalize_quotes, whitespace_split=self._whitespace_split)

  def _normalizer(self) -> tokenizers.normalizers.Normalizer:
    """HF's pre-sentencepiece normalisation, for the python path."""
    steps = []
    if self._normalize_quotes:
      steps += [tokenizers.normalizers.Replace("``", '"'),
                tokenizers.normalizers.Replace("''", '"')]
    if self._strip_accents:
      steps += [tokenizers.normalizers.NFKD(), tokenizers.normalizers.StripAccents()]
    if self._lower_case:
      steps.append(tokenizers.normalizers.Lowercase())
    if self._deleted_spaces:
      steps.append(tokenizers.normalizers.Replace(
          tokenizers.Regex(text_rules.char_class(self._deleted_spaces)), ""))
    if self._whitespace_split:  # HF's WhitespaceSplit: any Unicode space separates words.
      steps.append(tokenizers.normalizers.Replace(tokenizers.Regex(text_rules.WHITESPACE_RE), " "))
    else:
      steps.append(tokenizers.normalizers.Replace(tokenizers.Regex(" {2,}"), "▁"))
    return tokenizers.normalizers.Sequence(steps)

  def _prepare(self, segment: str) -> str:
    text = self._normalizer().normalize_str(segment)
    if not self._whitespace_split and text:
      text = text.replace(" ", "▁")
      text = text if text.startswith("▁") else "▁" + text
    return text

  def _encode(self, s: str) -> Sequence[int]:
    pattern = added_token_pattern(list(self._added))
    ids = []
    for segment in re.split(f"({pattern})", s) if pattern else [s]:
      if segment in self._added:
        ids.append(self._added[segment])
      elif segment:
        ids.extend(self.tokenizer.EncodeAsIds(self._prepare(segment)))
    return ids

  def _tokenize_tf(self, texts: tf.Tensor) -> tf.RaggedTensor:
    if self._normalize_quotes:
      texts = tf.strings.regex_replace(texts, "``|''", '"')
    if self._strip_accents:
      texts = text_rules.nfkd_tf(texts)
      texts = tf.strings.regex_replace(texts, text_rules.hf_chars("strip_accents"), "")
    if self._lower_case:
      texts = text_rules.lower_tf(texts)
    if self._deleted_spaces:
      texts = tf.strings.regex_replace(texts, text_rules.char_class(self._deleted_spaces), "")
    if self._whitespace_split:
      texts = tf.strings.regex_replace(texts, text_rules.WHITESPACE_RE, " ")
    else:
      spaced = tf.strings.regex_replace(
          tf.strings.regex_replace(texts, " {2,}", "▁"), " ", "▁")
      spaced = tf.where(tf.strings.regex_full_match(spaced, "(?s)▁.*"), spaced, "▁" + spaced)
      texts = tf.where(tf.strings.length(texts) > 0, spaced, texts)
    values, lengths = tf.numpy_function(self._sentencepiece_np, [texts], [tf.int32, tf.int64],
                                        stateful=False)
    return tf.RaggedTensor.from_row_lengths(tf.ensure_shape(values, [None]),
                                            tf.ensure_shape(lengths, [None]))

  def _sentencepiece_np(self, texts: np.ndarray):
    """[n] prepared texts -> (flat ids, [n] lengths), by the python path's sentencepiece."""
    encoded = self.tokenizer.EncodeAsIds([t.decode("utf-8") for t in texts.reshape(-1)])
    values = np.array([i for ids in encoded for i in ids], np.int32)
    return values, np.array([len(ids) for ids in encoded], np.int64)

  def __getstate__(self):
    state = super().__getstate__()
    if self._normalizer_spec_overrides is not None:  # protos of this module don't pickle
      state["_normalizer_spec_overrides"] = self._normalizer_spec_overrides.SerializeToString()
    return state

  def __setstate__(self, state):
    if isinstance(state.get("_normalizer_spec_overrides"), bytes):
      state = dict(state, _normalizer_spec_overrides=sentencepiece_model_pb2.NormalizerSpec
                   .FromString(state["_normalizer_spec_overrides"]))
    super().__setstate__(state)

  def id_to_token(self, i: int) -> str:
    return self.tokenizer.IdToPiece(i)

  def token_to_id(self, token: str) -> Optional[int]:
    i = self.tokenizer.PieceToId(token)
    return None if i == self.tokenizer.unk_id() and token != self.id_to_token(i) else i


def albert_vocabulary(model_file: str, extra_ids: int = 0) -> SentencePieceVocabulary:
  """ALBERT's 30k-clean.model as HF's AlbertTokenizer uses it (lowercased, no accents)."""
  return SentencePieceVocabulary(model_file, lower_case=True, strip_accents=True,
                                 normalize_quotes=True, extra_ids=extra_ids)


def xlnet_vocabulary(model_file: str, extra_ids: int = 0) -> SentencePieceVocabulary:
  """XLNet's cased spiece.model (accents stripped, as HF's XLNetTokenizer default)."""
  return SentencePieceVocabulary(model_file, strip_accents=True, normalize_quotes=True,
                                 extra_ids=extra_ids)


def bigbird_vocabulary(model_file: str, extra_ids: int = 0) -> SentencePieceVocabulary:
  """BigBird-RoBERTa's gpt2.model (cased, spaces kept as in HF's BigBirdTokenizer)."""
  return SentencePieceVocabulary(
      model_file, whitespace_split=False, extra_ids=extra_ids,
      roles=dict(pad="<pad>", unk="<unk>", cls="[CLS]", sep="[SEP]", mask="[MASK]",
                 bos="<s>", eos="</s>"))
