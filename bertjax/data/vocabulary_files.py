"""A vocabulary written as a Hugging Face tokenizer folder: what a pretraining run leaves
in its model_dir, so fine-tuning finds the vocabulary the model was trained on.

`save(vocabulary, directory, layout)` writes

  tokenizer.json         normaliser, pre-tokeniser, model, added tokens, and the
                         post-processor that lays out fine-tuning inputs;
  tokenizer_config.json  the special tokens by role (and padding_side 'left' for XLNet);
  vocab.txt / spiece.model  the vocabulary's own file (WordPiece / SentencePiece);

which `vocab_from_hf`, `hf_tokenizer.load` and transformers' AutoTokenizer read back into
the same tokenisation. A tokenizer that came with a post-processor keeps it; otherwise
`layout` (the pretraining recipe's, `recipes.Recipe.layout`) picks one of
`hf_tokenizer.TEMPLATES`: 'bert' ([CLS] A [SEP] B [SEP]; byte-level BPE vocabularies:
RoBERTa's <s> A </s></s> B </s>) or 'xlnet' (A <sep> B <sep> <cls>). A vocabulary without
classifier and separator roles (GPT-2's) gets none; fine-tuning then says so.
"""
import json
import os

import tokenizers
from sentencepiece import sentencepiece_model_pb2

from bertjax.data import hf_tokenizer
from bertjax.data.vocabularies import (ByteLevelBPEVocabulary, SentencePieceVocabulary,
                                      WordPieceVocabulary)

PADDING_SIDES = {"xlnet": "left"}


def _sentencepiece(vocabulary: SentencePieceVocabulary) -> tokenizers.Tokenizer:
  proto = sentencepiece_model_pb2.ModelProto.FromString(vocabulary.sp_model)
  special = vocabulary.special_ids
  added = {t: i in special for t, i in vocabulary.added_tokens.items()}
  return hf_tokenizer.sentencepiece_tokenizer(proto, added=added, **vocabulary.normalization)


def save(vocabulary, directory: str, layout: str = "bert") -> list[str]:
  """Writes `vocabulary`'s tokenizer files into `directory`; returns their names."""
  if layout not in hf_tokenizer.TEMPLATES or layout == "roberta":
    raise ValueError(f"layout {layout!r}: use 'bert' or 'xlnet'.")
  if getattr(vocabulary, "extra_ids", 0):
    raise ValueError(f"{type(vocabulary).__name__} has {vocabulary.extra_ids} extra ids (T5's "
                     "sentinels), which tokenizer files would leave out; keep its own files.")
  os.makedirs(directory, exist_ok=True)
  written = []
  if isinstance(vocabulary, SentencePieceVocabulary):
    tok = _sentencepiece(vocabulary)
    with open(os.path.join(directory, "spiece.model"), "wb") as f:
      f.write(vocabulary.sp_model)
    written.append("spiece.model")
  elif isinstance(vocabulary, (WordPieceVocabulary, ByteLevelBPEVocabulary)):
    tok = tokenizers.Tokenizer.from_str(vocabulary.tokenizer.to_str())
    if isinstance(vocabulary, WordPieceVocabulary):
      with open(os.path.join(directory, "vocab.txt"), "w", encoding="utf-8") as f:
        f.writelines(token + "\n" for token in vocabulary.vocab)
      written.append("vocab.txt")
  else:
    raise ValueError(f"Cannot write a {type(vocabulary).__name__} as tokenizer files; use a "
                     "bertjax.data.vocabularies class (WordPiece, SentencePiece, byte-level BPE).")
  tokens = {role: vocabulary.id_to_token(i) for role in hf_tokenizer.ROLES
            if (i := getattr(vocabulary, f"{role}_id", None)) is not None}
  if tok.post_processor is None and "cls" in tokens and "sep" in tokens:
    byte_level = isinstance(vocabulary, ByteLevelBPEVocabulary)
    template = "roberta" if layout == "bert" and byte_level else layout
    tok.post_processor = hf_tokenizer.post_processor(template, tokens, tok, directory)
  tok.save(os.path.join(directory, hf_tokenizer.TOKENIZER_JSON))
  config = {f"{role}_token": token for role, token in tokens.items()}
  if layout in PADDING_SIDES:
    config["padding_side"] = PADDING_SIDES[layout]
  with open(os.path.join(directory, hf_tokenizer.CONFIG_JSON), "w", encoding="utf-8") as f:
    json.dump(config, f, indent=2, ensure_ascii=False)
  return written + [hf_tokenizer.TOKENIZER_JSON, hf_tokenizer.CONFIG_JSON]
