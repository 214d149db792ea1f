"""WordPiece (BERT, ELECTRA, DistilBERT, MiniLM): the HF tokenizer in python, its
normaliser and split rebuilt with tensorflow-text in-graph."""
import json
from typing import Mapping, Optional, Sequence

import tensorflow as tf
import tensorflow_text as tf_text
import tokenizers

from bertjax.data import text_rules
from bertjax.data.vocabularies.base import MAX_WORD_CHARS, HFTokenizerVocabulary, replace_rows
from bertjax import files

class WordPieceVocabulary(HFTokenizerVocabulary):
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
      files.check_text(vocab_file)  # a binary file fails here, by name
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
          max_input_chars_per_word=MAX_WORD_CHARS))
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
        table, max_bytes_per_word=4 * MAX_WORD_CHARS, token_out_type=tf.int64,
        unknown_token="[UNK]")
    flat_words = words.flat_values
    pieces = wordpiece.tokenize(flat_words)
    too_long = tf.strings.length(flat_words, unit="UTF8_CHAR") > MAX_WORD_CHARS
    pieces = replace_rows(pieces, too_long,
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
