"""seqio Vocabularies for the BERT family: WordPiece, SentencePiece, byte-level BPE.

Every vocabulary reproduces the Hugging Face (`tokenizers`) reference: `.encode(text)`
returns the reference's ids without special tokens, and `.encode_tf` returns the same
ids inside a tf.data graph. Special ids are exposed by role:

  pad_id, unk_id, eos_id, bos_id, cls_id, sep_id, mask_id   (None where absent)
  special_ids                                                 frozenset of all of them

BERT-style vocabularies have no end-of-sequence token of their own; like HF's ALBERT
we use [SEP] as `eos_id`, because it is what terminates a BERT sequence.
`bertjax.data.hf_vocabulary.vocab_from_hf(path)` picks and configures the right class for
a local HF directory.
"""
import json
import re
from typing import Mapping, Optional, Sequence

import numpy as np
import seqio
import tensorflow as tf
import tensorflow_text as tf_text
import tokenizers
from sentencepiece import sentencepiece_model_pb2

from bertjax.data import text_rules

ROLES = ("pad", "unk", "cls", "sep", "mask", "bos", "eos")
_MAX_WORD_CHARS = 100  # HF WordPiece: longer words become [UNK].


def _added_token_pattern(tokens: Sequence[str]) -> Optional[str]:
  """A regex matching any added token, longest first (HF's leftmost-longest match)."""
  if not tokens:
    return None
  return "|".join(re.escape(t) for t in sorted(set(tokens), key=len, reverse=True))


def _replace_rows(ragged: tf.RaggedTensor, mask: tf.Tensor,
                  ids: tf.Tensor) -> tf.RaggedTensor:
  """Rows of a 2-D ragged tensor where `mask` holds become the single id `ids[row]`."""
  n = tf.shape(mask, out_type=tf.int64)[0]
  single = tf.RaggedTensor.from_row_lengths(
      tf.cast(ids, ragged.dtype), tf.ones([n], tf.int64))
  rows = tf.where(mask, tf.range(n) + n, tf.range(n))
  return tf.gather(tf.concat([ragged, single], axis=0), rows)


class _RoleIdsMixin:
  """Special ids by role, and batching of `encode_tf` over a `_tokenize_tf` of [n] texts.

  Subclasses set `self._roles` (role -> id) and `self._added` (added token -> id;
  these are split out of the raw text before tokenisation, as HF does).
  """
  _roles: Mapping[str, int]
  _added: Mapping[str, int]

  def _role(self, name: str) -> Optional[int]:
    return self._roles.get(name)

  pad_id = property(lambda self: self._role("pad"))
  unk_id = property(lambda self: self._role("unk"))
  cls_id = property(lambda self: self._role("cls"))
  sep_id = property(lambda self: self._role("sep"))
  mask_id = property(lambda self: self._role("mask"))
  bos_id = property(lambda self: self._role("bos"))
  eos_id = property(lambda self: self._role("eos"))

  @property
  def special_ids(self) -> frozenset:
    return frozenset(self._roles.values()) | frozenset(self._special_added)

  @property
  def added_tokens(self) -> Mapping[str, int]:
    return dict(self._added)

  def _split_added_tf(self, texts: tf.Tensor):
    """[n] texts -> ([n, segments] ragged strings, [m] bool: segment is an added token)."""
    pattern = _added_token_pattern(list(self._added))
    texts = tf.strings.regex_replace(texts, r"\x00", text_rules.NUL_STAND_IN)
    if pattern is None:
      segments = tf.RaggedTensor.from_tensor(tf.expand_dims(texts, 1))
      return segments, tf.zeros_like(segments.flat_values, tf.bool)
    segments = tf_text.regex_split(texts, pattern, pattern)
    return segments, tf.strings.regex_full_match(segments.flat_values, pattern)

  def _added_ids_tf(self, segments: tf.Tensor) -> tf.Tensor:
    keys = list(self._added)
    if not keys:  # TF refuses an empty table; with no added tokens no segment is one.
      return tf.fill(tf.shape(segments), tf.constant(-1, tf.int64))
    table = tf.lookup.StaticHashTable(
        tf.lookup.KeyValueTensorInitializer(
            tf.constant(keys, tf.string), tf.constant([self._added[k] for k in keys],
                                                      tf.int64)), -1)
    return table.lookup(segments)

  def _encode_segments_tf(self, texts: tf.Tensor) -> tf.RaggedTensor:
    """Split out added tokens, tokenise the rest with `_tokenize_tf`; [n] -> [n, ?]."""
    segments, is_added = self._split_added_tf(texts)
    flat = segments.flat_values
    ids = self._tokenize_tf(tf.where(is_added, tf.constant(""), flat))
    ids = _replace_rows(tf.cast(ids, tf.int64), is_added, self._added_ids_tf(flat))
    return segments.with_flat_values(ids).merge_dims(1, 2)

  def _encode_tf(self, s: tf.Tensor) -> tf.Tensor:
    """Scalar string -> [tokens] int32; [n] strings -> [n, ?] ragged int32."""
    s = tf.convert_to_tensor(s, tf.string)
    ids = tf.cast(self._encode_segments_tf(tf.reshape(s, [-1])), tf.int32)
    return ids.flat_values if s.shape.rank == 0 else ids


class _HFTokenizerVocabulary(_RoleIdsMixin, seqio.Vocabulary):
  """Shared python side: a `tokenizers.Tokenizer` gives encode / decode."""

  def __init__(self, tokenizer: tokenizers.Tokenizer, roles: Mapping[str, str],
               extra_ids: int = 0):
    super().__init__(extra_ids=extra_ids)
    # A saved tokenizer.json may carry padding/truncation; encode() must not.
    tokenizer.no_padding()
    tokenizer.no_truncation()
    self._tokenizer = tokenizer
    self._roles = {r: tokenizer.token_to_id(t) for r, t in roles.items()
                   if t is not None and tokenizer.token_to_id(t) is not None}
    added = tokenizer.get_added_tokens_decoder()
    self._added = {t.content: i for i, t in added.items()}
    self._special_added = [i for i, t in added.items() if t.special]

  @property
  def tokenizer(self) -> tokenizers.Tokenizer:
    return self._tokenizer

  @property
  def _base_vocab_size(self) -> int:
    return self._tokenizer.get_vocab_size(with_added_tokens=True)

  def _encode(self, s: str) -> Sequence[int]:
    return self._tokenizer.encode(s, add_special_tokens=False).ids

  def _decode(self, ids) -> str:
    return self._tokenizer.decode([int(i) for i in ids], skip_special_tokens=True)

  def id_to_token(self, i: int) -> Optional[str]:
    return self._tokenizer.id_to_token(i)

  def token_to_id(self, token: str) -> Optional[int]:
    return self._tokenizer.token_to_id(token)

  def __eq__(self, other):
    return (type(self) is type(other) and
            self._tokenizer.to_str() == other._tokenizer.to_str())

  def __hash__(self):
    return hash(self._tokenizer.to_str())


class WordPieceVocabulary(_HFTokenizerVocabulary):
  """BERT / ELECTRA / DistilBERT WordPiece; in-graph encode with tensorflow_text.

  The TF side follows HF's BertNormalizer step by step (clean text, strip accents via
  NFD, lowercase), then BertPreTokenizer's split (whitespace; punctuation and CJK stand
  alone), with character sets taken from tokenizers itself, and tf_text's
  WordpieceTokenizer, with words over 100 characters -> [UNK].
  """

  def __init__(self, vocab_file: Optional[str] = None, lower_case: bool = True,
               strip_accents: Optional[bool] = None, extra_ids: int = 0,
               tokenizer_json: Optional[str] = None,
               roles: Optional[Mapping[str, str]] = None):
    self._lower_case = lower_case
    self._strip_accents = lower_case if strip_accents is None else strip_accents
    if vocab_file:
      with open(vocab_file, encoding="utf-8") as f:
        self._vocab = [line.rstrip("\n") for line in f]
    elif tokenizer_json:
      with open(tokenizer_json, encoding="utf-8") as f:
        by_id = json.load(f)["model"]["vocab"]
      self._vocab = sorted(by_id, key=by_id.get)
    else:
      raise ValueError("WordPieceVocabulary needs vocab_file (vocab.txt) or tokenizer_json.")
    if tokenizer_json:
      tok = tokenizers.Tokenizer.from_file(tokenizer_json)
    else:
      tok = tokenizers.Tokenizer(tokenizers.models.WordPiece(
          {t: i for i, t in enumerate(self._vocab)}, unk_token="[UNK]",
          max_input_chars_per_word=_MAX_WORD_CHARS))
      tok.normalizer = tokenizers.normalizers.BertNormalizer(
          clean_text=True, handle_chinese_chars=True,
          strip_accents=self._strip_accents, lowercase=lower_case)
      tok.pre_tokenizer = tokenizers.pre_tokenizers.BertPreTokenizer()
      tok.decoder = tokenizers.decoders.WordPiece(prefix="##", cleanup=True)
      tok.add_special_tokens([t for t in ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
                              if t in self._vocab])
    roles = {**dict(pad="[PAD]", unk="[UNK]", cls="[CLS]", sep="[SEP]", mask="[MASK]",
                    eos="[SEP]"), **(roles or {})}
    super().__init__(tok, roles, extra_ids)

  @property
  def vocab(self) -> Sequence[str]:
    return list(self._vocab)

  def _normalize_tf(self, texts: tf.Tensor) -> tf.Tensor:
    texts = tf.strings.regex_replace(texts, text_rules.hf_chars("clean_text"), "")
    texts = tf.strings.regex_replace(texts, text_rules.WHITESPACE_RE, " ")
    if self._strip_accents:
      texts = tf_text.normalize_utf8(texts, "NFD")
      texts = tf.strings.regex_replace(texts, text_rules.hf_chars("bert_accents"), "")
    if self._lower_case:
      texts = text_rules.lower_tf(texts)
    return texts

  def _tokenize_tf(self, texts: tf.Tensor) -> tf.RaggedTensor:
    # BertPreTokenizer: split on whitespace, punctuation and CJK characters stand alone.
    alone = f"{text_rules.hf_chars('punctuation')}|{text_rules.hf_chars('cjk')}"
    words = tf_text.regex_split(self._normalize_tf(texts), f" +|{alone}", alone)
    table = tf.lookup.StaticVocabularyTable(
        tf.lookup.KeyValueTensorInitializer(
            self._vocab, tf.range(len(self._vocab), dtype=tf.int64)), 1)
    wordpiece = tf_text.WordpieceTokenizer(
        table, max_bytes_per_word=4 * _MAX_WORD_CHARS, token_out_type=tf.int64,
        unknown_token="[UNK]")
    flat_words = words.flat_values
    pieces = wordpiece.tokenize(flat_words)
    too_long = tf.strings.length(flat_words, unit="UTF8_CHAR") > _MAX_WORD_CHARS
    pieces = _replace_rows(pieces, too_long,
                           tf.fill(tf.shape(too_long), tf.cast(self.unk_id, tf.int64)))
    return words.with_flat_values(pieces).merge_dims(1, 2)

  def _decode_tf(self, ids: tf.Tensor) -> tf.Tensor:
    """Joins word pieces as HF's WordPiece decoder does (special tokens skipped)."""
    ids = tf.cast(ids, tf.int64)
    keep = tf.logical_not(tf.reduce_any(
        tf.equal(tf.expand_dims(ids, -1), tf.constant(sorted(self.special_ids), tf.int64)),
        axis=-1))
    tokens = tf.gather(tf.constant(self._vocab), tf.where(keep, ids, 0))
    tokens = tf.ragged.boolean_mask(tokens, keep)
    text = tf.strings.reduce_join(tokens, axis=-1, separator=" ")
    text = tf.strings.regex_replace(text, " ##", "")
    # HF's cleanup runs per token, so only a lone punctuation token loses its space.
    return tf.strings.regex_replace(text, r" ([.?!,])( |$)", r"\1\2")

  def __getstate__(self):
    state = self.__dict__.copy()
    state["_tokenizer"] = self._tokenizer.to_str()
    return state

  def __setstate__(self, state):
    state["_tokenizer"] = tokenizers.Tokenizer.from_str(state["_tokenizer"])
    self.__dict__.update(state)


class ByteLevelBPEVocabulary(_HFTokenizerVocabulary):
  """RoBERTa / BART / GPT-2 byte-level BPE. TF side wraps the python tokenizer.

  Build from a tokenizer.json, or from vocab.json/encoder.json + merges.txt/vocab.bpe
  with `special_tokens` naming the role tokens (e.g. {'eos': '<|endoftext|>'}).
  """

  def __init__(self, vocab_file: Optional[str] = None, merges_file: Optional[str] = None,
               special_tokens: Optional[Mapping[str, str]] = None,
               add_prefix_space: bool = False, tokenizer_json: Optional[str] = None,
               extra_ids: int = 0):
    if tokenizer_json:
      tok = tokenizers.Tokenizer.from_file(tokenizer_json)
    elif vocab_file and merges_file:
      tok = tokenizers.Tokenizer(tokenizers.models.BPE.from_file(vocab_file, merges_file))
      tok.pre_tokenizer = tokenizers.pre_tokenizers.ByteLevel(
          add_prefix_space=add_prefix_space)
      tok.decoder = tokenizers.decoders.ByteLevel()
    else:
      raise ValueError("ByteLevelBPEVocabulary needs tokenizer_json, or vocab_file "
                       "(vocab.json / encoder.json) and merges_file (merges.txt / vocab.bpe).")
    roles = dict(special_tokens or {})
    # As in HF, role tokens are special: cut out of the raw text before BPE.
    tok.add_special_tokens(sorted({t for t in roles.values() if t is not None}))
    # GPT-2 has no pad token; its end-of-text token is the usual stand-in.
    roles.setdefault("pad", roles.get("eos"))
    super().__init__(tok, roles, extra_ids)

  def _encode_np(self, texts: np.ndarray):
    encoded = self._tokenizer.encode_batch(
        [t.decode("utf-8", "replace") for t in texts.reshape(-1)],
        add_special_tokens=False)
    values = np.array([i for e in encoded for i in e.ids], np.int64)
    return values, np.array([len(e.ids) for e in encoded], np.int64)

  def _encode_segments_tf(self, texts: tf.Tensor) -> tf.RaggedTensor:
    values, lengths = tf.numpy_function(self._encode_np, [texts], [tf.int64, tf.int64],
                                        stateful=False)
    return tf.RaggedTensor.from_row_lengths(tf.ensure_shape(values, [None]),
                                            tf.ensure_shape(lengths, [None]))

  def _decode_np(self, ids: np.ndarray) -> np.ndarray:
    rows = ids.reshape(-1, ids.shape[-1]) if ids.ndim else ids.reshape(1, 1)
    out = [self._decode(r).encode("utf-8") for r in rows]
    return np.array(out, dtype=object).reshape(ids.shape[:-1])

  def _decode_tf(self, ids: tf.Tensor) -> tf.Tensor:
    out = tf.numpy_function(self._decode_np, [ids], tf.string, stateful=False)
    return tf.ensure_shape(out, ids.shape[:-1])

  def __getstate__(self):
    state = self.__dict__.copy()
    state["_tokenizer"] = self._tokenizer.to_str()
    return state

  def __setstate__(self, state):
    state["_tokenizer"] = tokenizers.Tokenizer.from_str(state["_tokenizer"])
    self.__dict__.update(state)


_SP = sentencepiece_model_pb2.ModelProto.SentencePiece
_SP_DEFAULT_ROLES = dict(pad=("<pad>",), unk=("<unk>",), cls=("[CLS]", "<cls>"),
                         sep=("[SEP]", "<sep>"), mask=("[MASK]", "<mask>"), bos=("<s>",),
                         eos=("</s>", "[SEP]", "<sep>"))


class SentencePieceVocabulary(_RoleIdsMixin, seqio.SentencePieceVocabulary):
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
  The python and TF paths run the same steps (python via sentencepiece, TF via
  tensorflow_text), so `encode_tf` equals `encode`.
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
    pattern = _added_token_pattern(list(self._added))
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
    return self.tf_tokenizer.tokenize(texts)

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
