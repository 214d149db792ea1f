"""Byte-level BPE (GPT-2, RoBERTa, Longformer): the HF tokenizer in python and in-graph."""
from typing import Mapping, Optional

import numpy as np
import tensorflow as tf
import tokenizers

from bertjax.data.vocabularies.base import HFTokenizerVocabulary

class ByteLevelBPEVocabulary(HFTokenizerVocabulary):
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
