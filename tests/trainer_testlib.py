"""Shared helpers for the trainer tests: a tiny BERT and a synthetic MLM+NSP stream."""
import numpy as np

from bertjax.models import bert

VOCAB = 64


def tiny_bert_config(**overrides):
  kw = dict(vocab_size=VOCAB, hidden_size=32, num_layers=2, num_heads=2, intermediate_size=64,
            max_position_embeddings=64)
  kw.update(overrides)
  return bert.BertConfig(**kw)


class SyntheticMlmNsp:
  """A re-iterable, seeded stream of MLM+NSP batches with a learnable pattern.

  Tokens follow a fixed bigram-ish rule (next = (prev * 3 + 1) % VOCAB with noise), so
  a model can learn to predict masked tokens from their neighbours; the NSP label is
  whether the second half continues the rule.
  """

  def __init__(self, task_name, split, batch_size, sequence_length, seed, shard_id=0,
               num_shards=1, num_batches=None, nan_at=None):
    del task_name
    self.batch_size, self.length = batch_size, sequence_length
    self.seed = seed * 1000 + shard_id * 17 + (0 if split == "train" else 999)
    self.num_batches = num_batches if split == "train" else (num_batches or 4)

  def __iter__(self):
    rng = np.random.default_rng(self.seed)
    i = 0
    while self.num_batches is None or i < self.num_batches:
      yield self._batch(rng)
      i += 1

  def _batch(self, rng):
    b, l = self.batch_size, self.length
    ids = np.zeros((b, l), np.int32)
    ids[:, 0] = rng.integers(5, VOCAB, b)
    for t in range(1, l):
      ids[:, t] = np.where(rng.random(b) < 0.9, (ids[:, t - 1] * 3 + 1) % (VOCAB - 5) + 5,
                           rng.integers(5, VOCAB, b))
    nsp = rng.integers(0, 2, b).astype(np.int32)
    half = l // 2
    ids[nsp == 1, half:] = rng.integers(5, VOCAB, (int(nsp.sum()), l - half))
    selected = rng.random((b, l)) < 0.15
    inputs = np.where(selected, 4, ids).astype(np.int32)
    return {
        "input_ids": inputs,
        "attention_mask": np.ones((b, l), np.int32),
        "token_type_ids": (np.arange(l)[None] >= half).repeat(b, 0).astype(np.int32),
        "mlm_targets": np.where(selected, ids, 0).astype(np.int32),
        "mlm_weights": selected.astype(np.float32),
        "next_sentence_label": nsp,
    }
