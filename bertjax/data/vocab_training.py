"""Train new WordPiece / SentencePiece vocabularies from an iterable of texts.

Both write a directory that `vocab_from_hf` (and HF's AutoTokenizer, for WordPiece)
loads, and return the loaded vocabulary.
"""
import collections
import json
import os
from typing import Iterable, Optional, Sequence

import sentencepiece as spm
import tokenizers

from bertjax.data import hf_vocabulary, vocabularies

BERT_SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")


def train_wordpiece(texts: Iterable[str], vocab_size: int, out_dir: str,
                    lower_case: bool = True, min_frequency: int = 2,
                    special_tokens: Sequence[str] = BERT_SPECIAL_TOKENS,
                    limit_alphabet: int = 1000) -> vocabularies.WordPieceVocabulary:
  """BERT-style WordPiece (special tokens first: [PAD]=0, [UNK]=1, ...), the same
  vocabulary, in the same order, on every run.

  `tokenizers`' trainer numbers the word-continuing characters ('##e') in the order it
  meets them while walking a hash map, which changes from process to process; equal merge
  counts are broken by those numbers, so two runs on the same text could learn different
  vocabularies (huggingface/tokenizers#1794). Here those pieces are numbered beforehand,
  by how often they occur, so nothing is left to the walk.

  Writes vocab.txt, tokenizer.json and tokenizer_config.json to `out_dir`.
  """
  texts = list(texts)
  normalizer = tokenizers.normalizers.BertNormalizer(
      clean_text=True, handle_chinese_chars=True, strip_accents=lower_case,
      lowercase=lower_case)
  pre_tokenizer = tokenizers.pre_tokenizers.BertPreTokenizer()
  trainer = tokenizers.trainers.WordPieceTrainer(
      vocab_size=vocab_size, min_frequency=min_frequency,
      special_tokens=list(special_tokens) + _continuing_pieces(
          texts, normalizer, pre_tokenizer, limit_alphabet),
      limit_alphabet=limit_alphabet, continuing_subword_prefix="##", show_progress=False)
  trained = _wordpiece_tokenizer(normalizer, pre_tokenizer)
  trained.train_from_iterator(texts, trainer=trainer)
  vocab = trained.get_vocab()
  pieces = sorted(vocab, key=vocab.get)

  # Rebuilt from the vocabulary, so that only the real special tokens are special (the
  # numbered '##e' pieces are ordinary word pieces).
  tokenizer = _wordpiece_tokenizer(normalizer, pre_tokenizer,
                                   {piece: i for i, piece in enumerate(pieces)})
  tokenizer.add_special_tokens(list(special_tokens))
  os.makedirs(out_dir, exist_ok=True)
  with open(os.path.join(out_dir, "vocab.txt"), "w", encoding="utf-8") as f:
    f.writelines(t + "\n" for t in pieces)
  tokenizer.save(os.path.join(out_dir, "tokenizer.json"))
  config = dict(tokenizer_class="BertTokenizer", do_lower_case=lower_case,
                strip_accents=None, tokenize_chinese_chars=True, pad_token="[PAD]",
                unk_token="[UNK]", cls_token="[CLS]", sep_token="[SEP]",
                mask_token="[MASK]", model_max_length=512)
  with open(os.path.join(out_dir, "tokenizer_config.json"), "w", encoding="utf-8") as f:
    json.dump(config, f, indent=2)
  return hf_vocabulary.vocab_from_hf(out_dir)


def _wordpiece_tokenizer(normalizer, pre_tokenizer, vocab=None) -> tokenizers.Tokenizer:
  tokenizer = tokenizers.Tokenizer(tokenizers.models.WordPiece(
      vocab, unk_token="[UNK]", max_input_chars_per_word=100))
  tokenizer.normalizer = normalizer
  tokenizer.pre_tokenizer = pre_tokenizer
  tokenizer.decoder = tokenizers.decoders.WordPiece(prefix="##")
  return tokenizer


def _continuing_pieces(texts: Sequence[str], normalizer, pre_tokenizer,
                       limit_alphabet: int) -> list[str]:
  """'##c' for every character c of the trainer's alphabet (the `limit_alphabet` most
  frequent ones) that continues some word, most frequent first (ties by character)."""
  words = collections.Counter(
      word for text in texts
      for word, _ in pre_tokenizer.pre_tokenize_str(normalizer.normalize_str(text)))
  chars, continuing = collections.Counter(), set()
  for word, count in words.items():
    for char in word:
      chars[char] += count
    continuing.update(word[1:])
  alphabet = sorted(chars, key=lambda c: (-chars[c], c))[:limit_alphabet]
  return ["##" + c for c in alphabet if c in continuing]


def train_sentencepiece(texts: Iterable[str], vocab_size: int, out_dir: str,
                        model_type: str = "unigram", lower_case: bool = False,
                        character_coverage: float = 0.9995,
                        control_symbols: Sequence[str] = ("[CLS]", "[SEP]", "[MASK]"),
                        user_defined_symbols: Sequence[str] = (),
                        num_threads: int = 1,
                        extra_ids: int = 0,
                        seed_sentencepiece_size: Optional[int] = None,
                        ) -> vocabularies.SentencePieceVocabulary:
  """SentencePiece in seqio's id layout: <pad>=0, </s>=1, <unk>=2, then control symbols.

  `lower_case` uses sentencepiece's own case-folding normaliser (nmt_nfkc_cf), so the
  model lowercases by itself and needs no outside normalisation. Writes spiece.model
  and spiece.vocab to `out_dir`.
  """
  os.makedirs(out_dir, exist_ok=True)
  prefix = os.path.join(out_dir, "spiece")
  kwargs = {}
  if seed_sentencepiece_size:
    kwargs["seed_sentencepiece_size"] = seed_sentencepiece_size
  spm.SentencePieceTrainer.train(
      sentence_iterator=iter(texts), model_prefix=prefix, vocab_size=vocab_size,
      model_type=model_type, character_coverage=character_coverage,
      normalization_rule_name="nmt_nfkc_cf" if lower_case else "nmt_nfkc",
      pad_id=0, eos_id=1, unk_id=2, bos_id=-1,
      control_symbols=list(control_symbols), user_defined_symbols=list(user_defined_symbols),
      hard_vocab_limit=False, num_threads=num_threads, minloglevel=2, **kwargs)
  # Only control/unknown pieces are split out of raw text, as sentencepiece itself does
  # for user-defined symbols anyway; this keeps encode() equal to plain sentencepiece.
  return vocabularies.SentencePieceVocabulary(
      prefix + ".model", added_tokens=list(control_symbols), extra_ids=extra_ids)
