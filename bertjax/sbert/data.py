"""Training data for SiameseModel: NLI / STS pairs -> [B, S, L] batches, or packed rows.

Each example is a tuple of S sentences (pair, triplet, anchor + candidates) plus an
optional `label` (NLI class) or `score` (gold similarity). Batches pad every sentence
of the batch to one length, rounded up to a power of two (at least `min_length`), so
jit compiles only log2(max_seq_length / min_length) + 1 train steps: on a CPU one
compile costs minutes, more than hundreds of steps. Shuffled batches are drawn from
windows of `bucket_batches` batches sorted by length (as the finetune loop does), so
most batches are short; a last partial batch is padded with weight-0 examples to keep
the batch size fixed.

Even so, NLI and STS sentences (~10-20 tokens) leave 40-50% of such rows padding.
`packed_batches` lays the same batches' sentences end to end in rows of max_seq_length
tokens, kept apart by segment ids (the layout `bertjax.encode` packs for inference), so the
encoder computes on real tokens only.
"""
import dataclasses
import os
import pathlib
from typing import Iterator, Optional, Sequence

import numpy as np

from bertjax import paths
from bertjax.sbert.encode import fill_rows, next_power_of_two, pack_rows
from bertjax.sbert.io import Tokenizer
from bertjax.sbert.model import SENTENCES_PER_ROW

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
  ids = _token_ids(examples, tokenizer, max_seq_length)
  for chosen in _example_groups(ids, num_sentences, batch_size, shuffle, seed, epoch,
                                bucket_batches):
    rows = [ids[i * num_sentences + k] for i in chosen for k in range(num_sentences)]
    length = max(next_power_of_two(max(len(x) for x in rows)), min_length)
    input_ids = np.full((batch_size * num_sentences, length), tokenizer.pad_id, np.int32)
    mask = np.zeros_like(input_ids)
    for row, x in enumerate(rows):
      input_ids[row, :len(x)] = x
      mask[row, :len(x)] = 1
    shape = (batch_size, num_sentences, length)
    yield {"input_ids": input_ids.reshape(shape), "attention_mask": mask.reshape(shape),
           **_targets(examples, chosen, batch_size)}


def packed_batches(examples: Examples, tokenizer: Tokenizer, batch_size: int,
                   max_seq_length: int = 128, sentences_per_row: int = SENTENCES_PER_ROW,
                   num_microbatches: int = 1, row_multiple: int = 1, shuffle: bool = True,
                   seed: int = 0, epoch: int = 0, bucket_batches: int = 20
                   ) -> Iterator[dict[str, np.ndarray]]:
  """The examples of `batches` (the same ones in the same batches), their sentences packed
  end to end into rows of `max_seq_length` tokens instead of one padded row each.

  Features: input_ids / attention_mask / segment_ids / position_ids [R, max_seq_length]
  (segments 1..`sentences_per_row` in a row, 0 = padding; positions restart per sentence),
  `sentence_slots` [B, S] (where sentence s of example b was pooled: its row in its
  microbatch x `sentences_per_row` + its segment - 1), weight [B], and label / score.
  SiameseModel(sentences_per_row=...) gathers the pooled sentences back to [B, S, H].

  The trainer's microbatch i takes examples i, i + n, ... and rows i, i + n, ... (train.step),
  so each microbatch's sentences are packed into rows of their own, and its slots count
  its own rows: with n > 1 the batch is read split, as the train step splits it. Rows per
  microbatch are a `row_bucket` (few compiled shapes) and a multiple of `row_multiple`
  (the devices that split a microbatch); rows past the packed ones are empty.
  """
  num_sentences = len(examples.sentences[0])
  ids = _token_ids(examples, tokenizer, max_seq_length)
  n = num_microbatches
  if batch_size % n:
    raise ValueError(f"batch_size={batch_size} is not divisible by num_microbatches={n}.")
  for chosen in _example_groups(ids, num_sentences, batch_size, shuffle, seed, epoch,
                                bucket_batches):
    parts = []  # per microbatch: (its sentences' token ids, its rows)
    for m in range(n):
      sentences = [ids[i * num_sentences + k] for i in chosen[m::n] for k in range(num_sentences)]
      rows = [members for _, members in
              pack_rows([len(x) for x in sentences], max_seq_length, sentences_per_row)]
      parts.append((sentences, rows))
    per_part = row_bucket(max(len(rows) for _, rows in parts))
    per_part = -(-per_part // row_multiple) * row_multiple
    shape = (per_part * n, max_seq_length)
    arrays = {"input_ids": np.full(shape, tokenizer.pad_id, np.int32),
              "segment_ids": np.zeros(shape, np.int32), "position_ids": np.zeros(shape, np.int32)}
    slots = np.zeros((batch_size, num_sentences), np.int32)  # padding examples: slot 0
    for m, (sentences, rows) in enumerate(parts):
      if not sentences:  # a last, partial batch with fewer examples than microbatches
        continue
      filled = fill_rows(sentences, rows, per_part, max_seq_length, tokenizer.pad_id)
      at = np.arange(per_part) * n + m  # this microbatch's rows in the batch
      arrays["input_ids"][at] = filled.input_ids
      arrays["segment_ids"][at] = filled.segment_ids
      arrays["position_ids"][at] = filled.position_ids
      example, sentence = np.divmod(filled.sentences, num_sentences)
      slots[example * n + m, sentence] = filled.rows * sentences_per_row + filled.slots
    arrays["attention_mask"] = (arrays["segment_ids"] > 0).astype(np.int32)
    yield {**arrays, "sentence_slots": slots, **_targets(examples, chosen, batch_size)}


def row_bucket(rows: int) -> int:
  """The smallest of 1, 2, 3, 4, 6, 8, 12, 16, 24, ... (powers of two and 3/4 of them) that
  holds `rows`: few compiled shapes, and at most a third of a batch's rows left empty
  (powers of two alone left half: 0.67 of SNLI's and STS-B's slots real instead of 0.81)."""
  power = next_power_of_two(max(rows, 1))
  return power * 3 // 4 if power >= 4 and rows <= power * 3 // 4 else power


def _token_ids(examples: Examples, tokenizer: Tokenizer, max_seq_length: int) -> list:
  """Every sentence's token ids, example by example (S per example)."""
  flat = [s for example in examples.sentences for s in example]
  return tokenizer.encode(flat, max_seq_length)[0]


def _example_groups(ids: list, num_sentences: int, batch_size: int, shuffle: bool, seed: int,
                    epoch: int, bucket_batches: int) -> list[np.ndarray]:
  """The examples of each batch: in order, or shuffled with lengths grouped."""
  num_examples = len(ids) // num_sentences
  longest = np.array([len(x) for x in ids]).reshape(num_examples, num_sentences).max(1)
  order = np.arange(num_examples)
  if shuffle:
    rng = np.random.default_rng([seed, epoch])
    order = rng.permutation(num_examples)
    window = batch_size * max(bucket_batches, 1)
    chunks = [order[i:i + window] for i in range(0, len(order), window)]
    order = np.concatenate([c[np.argsort(longest[c], kind="stable")] for c in chunks])
  groups = [order[i:i + batch_size] for i in range(0, len(order), batch_size)]
  if shuffle:  # the last, partial batch stays last so every other batch is full
    full = num_examples // batch_size
    groups = [groups[i] for i in rng.permutation(full)] + groups[full:]
  return groups


def _targets(examples: Examples, chosen: np.ndarray, batch_size: int) -> dict[str, np.ndarray]:
  """weight [B] (0 for the examples padding a last batch) and the label / score [B]."""
  targets = {"weight": (np.arange(batch_size) < len(chosen)).astype(np.float32)}
  for name in ("label", "score"):
    values = getattr(examples, name)
    if values is not None:
      padded = np.zeros((batch_size,), values.dtype)
      padded[:len(chosen)] = values[chosen]
      targets[name] = padded
  return targets


def num_batches(examples: Sequence, batch_size: int) -> int:
  return -(-len(examples) // batch_size)
