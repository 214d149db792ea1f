"""Training data for SiameseModel: NLI / STS pairs -> [B, S, L] batches.

Each example is a tuple of S sentences (pair, triplet, anchor + candidates) plus an
optional `label` (NLI class) or `score` (gold similarity). Batches pad every sentence
of the batch to one length, rounded up to a power of two (at least `min_length`), so
jit compiles only log2(max_seq_length / min_length) + 1 train steps: on a CPU one
compile costs minutes, more than hundreds of steps. Shuffled batches are drawn from
windows of `bucket_batches` batches sorted by length (as the finetune loop does), so
most batches are short; a last partial batch is padded with weight-0 examples to keep
the batch size fixed.
"""
import dataclasses
import os
import pathlib
from typing import Iterator, Optional, Sequence

import numpy as np

from bertjax import paths
from bertjax.sbert.encode import next_power_of_two
from bertjax.sbert.io import Tokenizer

NLI_LABELS = {"entailment": 0, "neutral": 1, "contradiction": 2}


@dataclasses.dataclass(frozen=True)
class Examples:
  """S-tuples of sentences with optional per-example targets."""
  sentences: list[tuple[str, ...]]
  label: Optional[np.ndarray] = None  # int, NLI class
  score: Optional[np.ndarray] = None  # float, gold similarity

  def __len__(self) -> int:
    return len(self.sentences)


def read_senteval_nli(split: str, data_dir: str | os.PathLike | None = None) -> Examples:
  """SentEval's SNLI files s1.<split>, s2.<split>, labels.<split> (one item per line)."""
  root = pathlib.Path(data_dir or paths.data_dir()) / "snli_senteval"
  columns = []
  for name in ("s1", "s2", "labels"):
    path = root / f"{name}.{split}"
    if not path.exists():
      raise FileNotFoundError(f"{path} not found; expected SentEval SNLI files s1/s2/labels.{split} "
                              "under <data_dir>/snli_senteval.")
    columns.append(path.read_text(encoding="utf-8").rstrip("\n").split("\n"))
  s1, s2, labels = columns
  if not len(s1) == len(s2) == len(labels):
    raise ValueError(f"{root}: s1/s2/labels.{split} have {len(s1)}/{len(s2)}/{len(labels)} lines.")
  unknown = sorted(set(labels) - set(NLI_LABELS))
  if unknown:
    raise ValueError(f"{root}/labels.{split}: unknown labels {unknown[:5]}; expected "
                     f"{sorted(NLI_LABELS)}.")
  return Examples([(a.strip(), b.strip()) for a, b in zip(s1, s2)],
                  label=np.array([NLI_LABELS[x] for x in labels], np.int32))


def nli_triplets(nli: Examples) -> Examples:
  """(premise, entailed hypothesis, contradicting hypothesis) triplets from NLI pairs.

  The input for in-batch-negatives training with hard negatives (and for the
  triplet loss): each premise with an entailment and a contradiction gives one.
  """
  by_premise: dict[str, dict[int, str]] = {}
  for (premise, hypothesis), label in zip(nli.sentences, nli.label):
    by_premise.setdefault(premise, {}).setdefault(int(label), hypothesis)
  entail, contra = NLI_LABELS["entailment"], NLI_LABELS["contradiction"]
  return Examples([(p, h[entail], h[contra]) for p, h in by_premise.items()
                   if entail in h and contra in h])


def sts_examples(pairs, max_score: float = 5.0) -> Examples:
  """An evaluation.sts.StsPairs as regression examples, scores scaled to [0, 1]."""
  return Examples(list(zip(pairs.sentences1, pairs.sentences2)),
                  score=np.asarray(pairs.scores, np.float32) / max_score)


def batches(examples: Examples, tokenizer: Tokenizer, batch_size: int, max_seq_length: int = 128,
            min_length: int = 16, shuffle: bool = True, seed: int = 0, epoch: int = 0,
            bucket_batches: int = 20) -> Iterator[dict[str, np.ndarray]]:
  """Feature dicts: input_ids / attention_mask [B, S, L], weight [B], and label / score."""
  num_sentences = len(examples.sentences[0])
  flat = [s for example in examples.sentences for s in example]
  ids, _ = tokenizer.encode(flat, max_seq_length)
  longest = np.array([len(x) for x in ids]).reshape(len(examples), num_sentences).max(1)
  order = np.arange(len(examples))
  if shuffle:
    rng = np.random.default_rng([seed, epoch])
    order = rng.permutation(len(examples))
    window = batch_size * max(bucket_batches, 1)
    chunks = [order[i:i + window] for i in range(0, len(order), window)]
    order = np.concatenate([c[np.argsort(longest[c], kind="stable")] for c in chunks])
  groups = [order[i:i + batch_size] for i in range(0, len(order), batch_size)]
  if shuffle:  # the last, partial batch stays last so every other batch is full
    full = len(examples) // batch_size
    groups = [groups[i] for i in rng.permutation(full)] + groups[full:]
  for chosen in groups:
    rows = [ids[i * num_sentences + k] for i in chosen for k in range(num_sentences)]
    length = max(next_power_of_two(max(len(x) for x in rows)), min_length)
    input_ids = np.full((batch_size * num_sentences, length), tokenizer.pad_id, np.int32)
    mask = np.zeros_like(input_ids)
    for row, x in enumerate(rows):
      input_ids[row, :len(x)] = x
      mask[row, :len(x)] = 1
    shape = (batch_size, num_sentences, length)
    batch = {"input_ids": input_ids.reshape(shape), "attention_mask": mask.reshape(shape),
             "weight": (np.arange(batch_size) < len(chosen)).astype(np.float32)}
    for name in ("label", "score"):
      values = getattr(examples, name)
      if values is not None:
        padded = np.zeros((batch_size,), values.dtype)
        padded[:len(chosen)] = values[chosen]
        batch[name] = padded
    yield batch


def num_batches(examples: Sequence, batch_size: int) -> int:
  return -(-len(examples) // batch_size)
