"""How many near-duplicates does a static-masking batch hold?

BERT's static masking makes `dupe_factor` (10) copies of the data with different masks.
Until this change `masking.duplicate_examples` emitted each document's copies in a row,
ahead of seqio's 1,000-example shuffle buffer and of NSP's groups of 16 documents (where
the random B segments come from); BERT's create_pretraining_data loops over the whole
corpus once per copy and shuffles all instances. This counts, over batches of the
`bert_mlm_nsp` recipe (32 x 128, the corpus of experiments/scale), the pairs of rows of one
batch that are near-duplicates (their unmasked tokens share more than half of their token
trigrams), for the old order ('in a row') and today's ('whole passes').

    python experiments/scale/data_order.py --corpus=DIR [--batches=100]
"""
import argparse
import itertools
import os
import sys

import numpy as np
import tensorflow as tf

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
from bertjax.data import hf_vocabulary, wiki_books  # noqa: E402  pylint: disable=g-import-not-at-top
from bertjax.data.preprocessors import masking  # noqa: E402  pylint: disable=g-import-not-at-top
from bertjax.data.recipes import registry  # noqa: E402  pylint: disable=g-import-not-at-top


def in_a_row(dataset: tf.data.Dataset, dupe_factor: int = 10) -> tf.data.Dataset:
  """The old duplicate_examples: each document's copies one after another."""
  return dataset.flat_map(lambda ex: tf.data.Dataset.from_tensors(ex).repeat(dupe_factor))


def trigrams(row: dict) -> set:
  tokens = np.where(row["mlm_weights"] > 0, row["mlm_targets"], row["input_ids"])
  tokens = tokens[tokens > 0]
  return set(zip(tokens, tokens[1:], tokens[2:]))


def near_duplicate_pairs(batch: dict) -> int:
  rows = [trigrams({k: v[i] for k, v in batch.items()}) for i in range(len(batch["input_ids"]))]
  return sum(len(a & b) > 0.5 * min(len(a), len(b))
             for a, b in itertools.combinations(rows, 2) if a and b)


def measure(corpus: str, batches: int) -> list[int]:
  vocabulary = hf_vocabulary.hf_vocabulary(os.path.join(corpus, "wordpiece"))
  dataset = registry.get_dataset("bert_mlm_nsp", "train", sequence_length=128, batch_size=32,
                                 seed=0, vocabulary=vocabulary, source=wiki_books.wiki_books())
  return [near_duplicate_pairs(b) for b in itertools.islice(dataset.as_numpy_iterator(), batches)]


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--corpus", required=True, help="the tables' cpu corpus folder")
  parser.add_argument("--batches", type=int, default=100)
  args = parser.parse_args()
  today = masking.duplicate_examples
  for name, duplicate in (("in a row", in_a_row), ("whole passes", today)):
    masking.duplicate_examples = duplicate
    pairs = measure(args.corpus, args.batches)
    print(f"{name:>12}: {np.mean(pairs):.2f} near-duplicate pairs a batch of 32 "
          f"(max {max(pairs)}, {sum(p > 0 for p in pairs)} of {len(pairs)} batches hold any)")
  masking.duplicate_examples = today


if __name__ == "__main__":
  main()
