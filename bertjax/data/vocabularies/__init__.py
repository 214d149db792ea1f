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
from bertjax.data.vocabularies.base import ROLES
from bertjax.data.vocabularies.bytelevel import ByteLevelBPEVocabulary
from bertjax.data.vocabularies.sentencepiece import (SentencePieceVocabulary, albert_vocabulary,
                                                     bigbird_vocabulary, xlnet_vocabulary)
from bertjax.data.vocabularies.wordpiece import WordPieceVocabulary
