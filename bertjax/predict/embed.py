"""Sentence embeddings of your own texts: the packed encoder of `bertjax encode`."""
import numpy as np

from bertjax.predict import pipeline
from bertjax.sbert import encode


class SentenceEmbeddings:
  """One vector per text ([H] for a text, [N, H] for a list), pooled and normalised as the
  folder's sentence-transformers settings say (mean pooling without them), computed on
  packed rows (`sbert.encode.Encoder`)."""
  task = "sentence-embeddings"

  def __init__(self, model: str, tokenizer: str | None = None, batch_size: int = 32,
               max_seq_length: int | None = None, pooling: str | None = None,
               normalize: bool | None = None, packing: bool = True):
    if not packing:
      raise ValueError("sentence-embeddings always runs on packed rows (sbert.encode: exact, "
                       "each text attends only to itself); drop packing=False (--packing).")
    if tokenizer is not None:
      raise ValueError("sentence-embeddings reads the tokenizer of the model's folder; give a "
                       "folder holding both (or convert the model with its tokenizer).")
    self.encoder = encode.Encoder.from_checkpoint(model, pooling=pooling, normalize=normalize,
                                                  max_seq_length=max_seq_length,
                                                  batch_tokens=max(batch_size, 1) * 32)

  def __call__(self, inputs, progress: bool = False) -> np.ndarray:
    one = not isinstance(inputs, list)
    texts = [pipeline.as_text(t, "an input") for t in ([inputs] if one else inputs)]
    vectors = self.encoder.encode(texts, progress=progress)
    return vectors[0] if one else vectors
