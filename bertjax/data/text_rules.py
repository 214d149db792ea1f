"""Character-level text rules of HF's tokenizers, for the in-graph (TF) tokenisation path.

TF's RE2 and ICU and the Rust `tokenizers` crate disagree on some characters: their
Unicode tables differ in age (U+0890 is a format character to one and not the other,
ICU NFKD-decomposes characters tokenizers leaves alone), HF's StripAccents deletes all
combining marks (Mc too, not only \\p{Mn}), BERT's punctuation is ASCII symbols plus
\\p{P}. So the character sets here are asked of tokenizers itself and turned into RE2
classes: the TF path then acts on exactly the characters HF does. Asking takes about a
second a set, so each answer is kept in ~/.cache/bertjax (BERTJAX_CACHE_DIR), one file per
set and tokenizers version.
"""
import functools
import os

import numpy as np
import tensorflow as tf
import tensorflow_text as tf_text
import tokenizers

from bertjax import paths

# Unicode White_Space (Rust's char::is_whitespace).
WHITESPACE_CHARS = ("\t\n\x0b\x0c\r \x85\xa0\u1680" + "".join(map(chr, range(0x2000, 0x200b)))
                    + "\u2028\u2029\u202f\u205f\u3000")
# tf.strings.lower and tf_text's regex_split stop at NUL bytes, so NUL travels through
# the TF path as the noncharacter U+FDD0, which every tokeniser here treats as it does
# NUL (BERT's cleaning drops both; sentencepiece maps both to <unk>).
NUL_STAND_IN = "\ufdd0"


def char_class(chars: str) -> str:
  """A regex class of `chars` in the \\x{...} syntax both RE2 (TF) and Rust (tokenizers) read."""
  codes = sorted(map(ord, chars))
  ranges = []
  for code in codes:
    if ranges and code == ranges[-1][1] + 1:
      ranges[-1][1] = code
    else:
      ranges.append([code, code])
  return "[" + "".join(f"\\x{{{a:x}}}" if a == b else f"\\x{{{a:x}}}-\\x{{{b:x}}}"
                       for a, b in ranges) + "]"


WHITESPACE_RE = char_class(WHITESPACE_CHARS)


@functools.lru_cache(maxsize=None)
def hf_chars(kind: str) -> str:
  """A regex class of the characters one of HF's Rust text steps acts on.

  Kinds: "clean_text" (deleted by BertNormalizer's cleaning), "bert_accents" (deleted by
  BertNormalizer's accent stripping), "strip_accents" (deleted by StripAccents), "cjk"
  (spaced by handle_chinese_chars), "punctuation" (split off by BertPreTokenizer).
  Read from the cache when this tokenizers version already answered it.
  """
  path = os.path.join(paths.cache_dir(), f"hf_chars-{kind}-tokenizers-{tokenizers.__version__}.txt")
  try:
    with open(path, encoding="utf-8") as f:
      cached = f.read()
    if cached.startswith("[") and cached.endswith("]"):
      return cached
  except OSError:
    pass
  answer = _ask_tokenizers(kind)
  try:
    os.makedirs(paths.cache_dir(), exist_ok=True)
    paths.write_atomic(path, answer)
  except OSError:  # a read-only home: ask again next process
    pass
  return answer


def _ask_tokenizers(kind: str) -> str:
  chars = [chr(c) for c in range(1, 0x110000) if not 0xD800 <= c < 0xE000 and chr(c) != "|"]
  joined = "|".join(chars)
  bert = functools.partial(tokenizers.normalizers.BertNormalizer, clean_text=False,
                           handle_chinese_chars=False, strip_accents=False, lowercase=False)
  if kind == "punctuation":  # Joined by "a", only punctuation becomes a one-letter word.
    words = tokenizers.pre_tokenizers.BertPreTokenizer().pre_tokenize_str("a".join(chars))
    return char_class("|" + "".join(w for w, _ in words if len(w) == 1 and w != "a"))
  step = {"clean_text": bert(clean_text=True), "bert_accents": bert(strip_accents=True),
          "strip_accents": tokenizers.normalizers.StripAccents(),
          "cjk": bert(handle_chinese_chars=True)}[kind]
  out = step.normalize_str(joined).split("|")
  assert len(out) == len(chars), kind
  if kind == "cjk":
    return char_class("".join(c for c, o in zip(chars, out) if o == f" {c} "))
  deleted = "".join(c for c, o in zip(chars, out) if not o)
  if kind == "clean_text":
    deleted += "\x00" + NUL_STAND_IN
  return char_class(deleted)


@functools.lru_cache(maxsize=None)
def _decomposed_only_by_tf() -> np.ndarray:
  """Sorted code points TF's (newer) ICU tables NFKD-decompose but tokenizers' do not."""
  chars = [chr(c) for c in range(1, 0x110000) if not 0xD800 <= c < 0xE000]
  ours = tokenizers.normalizers.NFKD().normalize_str("\x00".join(chars)).split("\x00")
  theirs = tf_text.normalize_utf8(tf.constant(chars), "NFKD").numpy()
  return np.array([ord(c) for c, a, b in zip(chars, ours, theirs) if a.encode() != b],
                  np.int32)


def nfkd_tf(texts: tf.Tensor) -> tf.Tensor:
  """[n] strings -> NFKD as tokenizers computes it: the characters only TF decomposes
  travel through tf_text's NFKD as private-use stand-ins (plane 15), then come back."""
  with tf.init_scope():  # Computed eagerly once, also when first called inside a tf.function.
    originals = tf.constant(_decomposed_only_by_tf())
  stand_ins = 0xF0000 + tf.range(tf.size(originals), dtype=tf.int32)

  def swap(texts, source, target):
    codes = tf.strings.unicode_decode(texts, "UTF-8")
    flat = codes.flat_values
    index = tf.minimum(tf.searchsorted(source, flat), tf.size(source) - 1)
    flat = tf.where(tf.gather(source, index) == flat, tf.gather(target, index), flat)
    return tf.strings.unicode_encode(codes.with_flat_values(flat), "UTF-8")

  texts = tf_text.normalize_utf8(swap(texts, originals, stand_ins), "NFKD")
  return swap(texts, stand_ins, originals)


def lower_tf(texts: tf.Tensor) -> tf.Tensor:
  """Lowercases per character as HF does (TF would give a word-final sigma its ς form)."""
  return tf.strings.lower(tf.strings.regex_replace(texts, "Σ", "σ"), encoding="utf-8")
