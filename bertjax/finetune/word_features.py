"""Per-word features of pre-tokenized sentences for feature-based taggers and averaged
sentence vectors: a pretrained ELMo's layers, or word vectors trained with gensim.

  states = elmo_states(*open_elmo(MODEL_DIR), sentences)   # [N, W, 3, 2P] float16
  vectors = train_word_vectors(corpus_sentences, "fasttext")
  states = vector_states(vectors, sentences)               # [N, W, 1, D] float16

Both give `feature_based.FeatureTagger` its input ([N, W, K, H], zero rows past each
sentence's words): ELMo's K = 3 layers are mixed by the task's scalar mix (mode
"sum_all"), a word vector is one layer (mode "embeddings").
"""
import os
from typing import Sequence

import gensim
import jax
import numpy as np

from bertjax.checkpoints import params as checkpoint_params
from bertjax.checkpoints import legacy
from bertjax.models import elmo
from bertjax import characters

Sentences = Sequence[Sequence[str]]
KINDS = ("word2vec", "fasttext")


def open_elmo(model_dir: str) -> tuple[elmo.ElmoBiLM, dict]:
  """The ELMo a `python -m bertjax.main` run trained (its latest step), checked against
  the run's ElmoConfig (a checkpoint of another size fails naming every tensor)."""
  config_path = os.path.join(model_dir, legacy.RUN_CONFIG_FILE)
  if not os.path.isfile(config_path):
    raise FileNotFoundError(f"No {legacy.RUN_CONFIG_FILE} in {model_dir!r}: give the "
                            f"model_dir of a `python -m bertjax.main` ELMo run.")
  with open(config_path) as f:
    _, module = legacy.run_models(f.read(), config_path)[0]
  if not isinstance(module, elmo.ElmoBiLM):
    raise ValueError(f"{config_path} trained a {type(module).__name__}, not an ElmoBiLM.")
  params, metadata = checkpoint_params.load_params(model_dir)
  elmo.check_params(module.config, params, f"the checkpoint {metadata.get('source')}")
  return module, params


def elmo_states(module: elmo.ElmoBiLM, params, sentences: Sentences,
                batch_size: int = 64) -> np.ndarray:
  """float16 [N, W, num_layers + 1, 2P]: every ELMo layer at each word (each sentence
  read inside <S> ... </S>, as in pretraining; the marks' states are dropped)."""
  max_words = max(len(s) for s in sentences) + 2
  width = module.config.max_characters_per_word
  run = jax.jit(lambda p, ids: module.apply({"params": p}, ids, with_logits=False)
                ["hidden_states"])
  chunks = []
  for start in range(0, len(sentences), batch_size):
    ids = characters.batch_ids(sentences[start:start + batch_size], max_words, width)
    states = np.asarray(run(params, ids))  # [K, B, W + 2, 2P]
    chunks.append(np.moveaxis(states, 0, 2)[:, 1:-1].astype(np.float16))
  states = np.concatenate(chunks)
  states[_word_mask(sentences, max_words - 2) == 0] = 0.0  # the </S> of shorter sentences
  return states


def train_word_vectors(sentences: Sentences, kind: str, dim: int = 100, epochs: int = 5,
                       min_count: int = 2, window: int = 5, seed: int = 0):
  """gensim KeyedVectors (skip-gram word2vec, or fastText with its character n-grams)
  trained on `sentences` with one worker, so a seed gives the same vectors."""
  if kind not in KINDS:
    raise ValueError(f"Unknown word vector kind {kind!r}; use one of {KINDS}.")
  model_class = gensim.models.Word2Vec if kind == "word2vec" else gensim.models.FastText
  model = model_class([list(s) for s in sentences], vector_size=dim, window=window,
                      min_count=min_count, sg=1, epochs=epochs, seed=seed, workers=1)
  return model.wv


def vector_states(vectors, sentences: Sentences) -> np.ndarray:
  """float16 [N, W, 1, D]: each word's vector; a word without one (word2vec's unseen
  words) gets zeros, fastText builds one from its character n-grams."""
  max_words = max(len(s) for s in sentences)
  out = np.zeros((len(sentences), max_words, 1, vectors.vector_size), np.float16)
  for i, words in enumerate(sentences):
    for j, word in enumerate(words):
      if _has_vector(vectors, word):
        out[i, j, 0] = vectors[word]
  return out


def mean_vectors(vectors, sentences: Sentences) -> np.ndarray:
  """float32 [N, D]: the average of each sentence's word vectors (zeros if it has none),
  SBERT Table 1's "Avg. GloVe embeddings" row with these vectors."""
  out = np.zeros((len(sentences), vectors.vector_size), np.float32)
  for i, words in enumerate(sentences):
    known = [vectors[w] for w in words if _has_vector(vectors, w)]
    if known:
      out[i] = np.mean(known, axis=0)
  return out


def coverage(vectors, sentences: Sentences) -> float:
  """The fraction of word occurrences in the vectors' vocabulary."""
  words = [w for s in sentences for w in s]
  return sum(w in vectors.key_to_index for w in words) / max(len(words), 1)


def _has_vector(vectors, word: str) -> bool:
  subwords = isinstance(vectors, gensim.models.fasttext.FastTextKeyedVectors)
  return subwords or word in vectors.key_to_index


def _word_mask(sentences: Sentences, max_words: int) -> np.ndarray:
  lengths = np.array([len(s) for s in sentences])
  return (np.arange(max_words)[None] < lengths[:, None]).astype(np.int32)
