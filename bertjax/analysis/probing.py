"""Probing classifiers over a frozen encoder's layers (Tenney et al., 2019; Liu et al., 2019).

Word features: every hidden state (embeddings, layer 1, ..., layer N) at each word's first
sub-token (bertjax.finetune.feature_based.extract). Tasks from the CoNLL-2003 files: `pos`
(column 2), `chunk` (column 3) and `ner` (column 4) tags per word, and `ner_spans` /
`chunk_spans`, the edge probe: the type of each gold span from the concatenated features of
its first and last word. Probes are linear softmax classifiers trained full-batch with Adam,
one per layer (all layers at once, vmapped), plus one over a learned scalar mix of all
layers (bertjax.models.common.scalar_mix). Features are standardised with the training
set's per-layer mean and deviation.
"""
import dataclasses
import os
from typing import Sequence

import jax
import jax.numpy as jnp
import numpy as np
import optax

from bertjax.evaluation import conll
from bertjax.finetune import feature_based, ner
from bertjax.models.common.scalar_mix import ScalarMix

TOKEN_TASKS = {"pos": 1, "chunk": 2, "ner": 3}  # task -> CoNLL column
SPAN_TASKS = {"ner_spans": 3, "chunk_spans": 2}
TASKS = tuple(TOKEN_TASKS) + tuple(SPAN_TASKS)


@dataclasses.dataclass(frozen=True)
class TaggedSentence:
  words: tuple[str, ...]
  columns: tuple[tuple[str, ...], ...]  # [column 1..3][word]: POS, chunk, NER tags


def read_columns(path: str, limit: int | None = None) -> list[TaggedSentence]:
  """Sentences of a 4-column CoNLL-2003 file (`-DOCSTART-` and malformed lines skipped)."""
  if not os.path.exists(path):
    raise FileNotFoundError(f"No CoNLL-2003 file at {path!r}.")
  sentences, rows = [], []
  with open(path, encoding="utf-8") as f:
    for line in list(f) + [""]:
      fields = line.split()
      if len(fields) == 4 and fields[0] != "-DOCSTART-":
        rows.append(fields)
        continue
      if rows:
        sentences.append(TaggedSentence(tuple(r[0] for r in rows),
                                        tuple(tuple(r[c] for r in rows) for c in (1, 2, 3))))
        rows = []
      if limit is not None and len(sentences) >= limit:
        break
  return sentences


def word_states(module, params, tokenizer, sentences: Sequence[TaggedSentence],
                max_seq_length: int = 128, batch_size: int = 32,
                chunk: int = 256) -> tuple[np.ndarray, np.ndarray]:
  """(features [words, S, H] float32 of every word with a first piece, index [N, W]: each
  word's row in features, -1 where it has none (cut off by max_seq_length))."""
  width = max(len(s.words) for s in sentences)
  index = np.full((len(sentences), width), -1, np.int64)
  parts, count = [], 0
  for start in range(0, len(sentences), chunk):
    part = [conll.Sentence(s.words, ("O",) * len(s.words), "")
            for s in sentences[start:start + chunk]]
    arrays = ner.convert_sentences(part, tokenizer, max_seq_length)
    states = feature_based.extract(module, params, arrays, batch_size)
    kept = arrays["first_piece"] >= 0
    parts.append(states[kept].astype(np.float32))
    rows = np.flatnonzero(kept.ravel())
    local = np.full(kept.size, -1, np.int64)
    local[rows] = count + np.arange(len(rows))
    index[start:start + len(part), :kept.shape[1]] = local.reshape(kept.shape)
    count += len(rows)
  return np.concatenate(parts), index


def word_targets(sentences: Sequence[TaggedSentence], task: str, index: np.ndarray,
                 names: Sequence[str] | None = None) -> tuple[np.ndarray, np.ndarray, list[str]]:
  """(feature rows, labels, label names) of a token task's words that have features.
  names: the label set (default: the tags found here, sorted); others are left out."""
  if task not in TOKEN_TASKS:
    raise ValueError(f"task {task!r} is not a token task; use one of {sorted(TOKEN_TASKS)}.")
  column = TOKEN_TASKS[task] - 1
  names = list(names or sorted({t for s in sentences for t in s.columns[column]}))
  pairs = [(index[n, w], names.index(tag)) for n, s in enumerate(sentences)
           for w, tag in enumerate(s.columns[column]) if index[n, w] >= 0 and tag in names]
  rows, labels = zip(*pairs) if pairs else ((), ())
  return np.asarray(rows, np.int64), np.asarray(labels, np.int64), names


def span_targets(sentences: Sequence[TaggedSentence], task: str, index: np.ndarray,
                 names: Sequence[str] | None = None):
  """(first-word rows, last-word rows, labels, names) of the gold spans of a span task."""
  if task not in SPAN_TASKS:
    raise ValueError(f"task {task!r} is not a span task; use one of {sorted(SPAN_TASKS)}.")
  column = SPAN_TASKS[task] - 1
  spans = [(index[n, a], index[n, b], kind) for n, s in enumerate(sentences)
           for kind, a, b in conll.chunks(s.columns[column]) if index[n, a] >= 0 <= index[n, b]]
  names = list(names or sorted({kind for _, _, kind in spans}))
  spans = [s for s in spans if s[2] in names]
  return (np.asarray([s[0] for s in spans], np.int64), np.asarray([s[1] for s in spans], np.int64),
          np.asarray([names.index(s[2]) for s in spans], np.int64), names)


def standardise(train: np.ndarray, *others: np.ndarray) -> list[np.ndarray]:
  """x [..., S, H] -> (x - mean) / std per layer S, with the training set's statistics."""
  axes = tuple(range(train.ndim - 2)) + (train.ndim - 1,)
  mean = train.mean(axis=axes, keepdims=True)
  std = train.std(axis=axes, keepdims=True) + 1e-6
  return [((x - mean) / std).astype(np.float32) for x in (train,) + others]


def _fit(loss_fn, params, steps: int, learning_rate: float):
  tx = optax.adam(learning_rate)

  def body(_, carry):
    params, state = carry
    grads = jax.grad(loss_fn)(params)
    updates, state = tx.update(grads, state, params)
    return optax.apply_updates(params, updates), state

  return jax.lax.fori_loop(0, steps, body, (params, tx.init(params)))[0]


def _xent(logits, labels):
  """Mean cross-entropy; one-hot targets (a gather's gradient is a slow scatter on CPU)."""
  one_hot = jax.nn.one_hot(labels, logits.shape[-1], dtype=logits.dtype)
  return -(jax.nn.log_softmax(logits) * one_hot).sum(-1).mean()


def layer_probes(x_train: np.ndarray, y_train: np.ndarray, x_dev: np.ndarray, y_dev: np.ndarray,
                 num_classes: int, steps: int = 300, learning_rate: float = 0.05,
                 l2: float = 1e-4) -> np.ndarray:
  """One linear probe per layer on x [N, S, H]: dev accuracy per layer [S]."""
  x_train, x_dev = standardise(x_train, x_dev)
  layers_first = lambda x: jnp.moveaxis(jnp.asarray(x), 1, 0)  # [S, N, H]

  @jax.jit
  def train(x, y):
    def loss(p):
      logits = jnp.einsum("snh,shc->snc", x, p["w"]) + p["b"][:, None]
      per_layer = jax.vmap(_xent, in_axes=(0, None))(logits, y)
      return per_layer.sum() + l2 * jnp.sum(p["w"] ** 2)
    init = {"w": jnp.zeros((x.shape[0], x.shape[2], num_classes)),
            "b": jnp.zeros((x.shape[0], num_classes))}
    return _fit(loss, init, steps, learning_rate)

  p = train(layers_first(x_train), jnp.asarray(y_train))
  logits = jnp.einsum("snh,shc->snc", layers_first(x_dev), p["w"]) + p["b"][:, None]
  return np.asarray((jnp.argmax(logits, -1) == jnp.asarray(y_dev)[None]).mean(-1))


def mix_probe(x_train: np.ndarray, y_train: np.ndarray, x_dev: np.ndarray, y_dev: np.ndarray,
              num_classes: int, steps: int = 300, learning_rate: float = 0.05,
              l2: float = 1e-4) -> tuple[float, np.ndarray]:
  """A linear probe over a learned scalar mix of all layers: (dev accuracy, mix weights)."""
  x_train, x_dev = standardise(x_train, x_dev)
  mix = ScalarMix()
  hidden = x_train.shape[-1]

  def logits_of(p, x):
    return mix.apply({"params": p["mix"]}, x) @ p["w"] + p["b"]

  @jax.jit
  def train(x, y):
    init = {"mix": mix.init(jax.random.PRNGKey(0), x[:1])["params"],
            "w": jnp.zeros((hidden, num_classes)), "b": jnp.zeros((num_classes,))}
    return _fit(lambda p: _xent(logits_of(p, x), y) + l2 * jnp.sum(p["w"] ** 2), init, steps,
                learning_rate)

  p = train(jnp.asarray(x_train), jnp.asarray(y_train))
  accuracy = float((jnp.argmax(logits_of(p, jnp.asarray(x_dev)), -1) == y_dev).mean())
  return accuracy, np.asarray(jax.nn.softmax(p["mix"]["weights"]))


def span_features(features: np.ndarray, first: np.ndarray, last: np.ndarray) -> np.ndarray:
  """[spans, S, 2H]: the first and last word's features of each span, per layer."""
  return np.concatenate([features[first], features[last]], axis=-1)
