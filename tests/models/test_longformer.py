"""Longformer equals transformers' LongformerForMaskedLM / LongformerModel and the task
classes (per-layer windows, global attention on chosen tokens or the classes' defaults,
padding, random weights), through from_hf / to_hf."""
import numpy as np
import transformers

from bertjax.models import longformer
from tests.helpers import hf as hf_helpers, parity

PAD, SEP = 1, 2
# Windows 4 and 8 (w = 2 and 4 per side); the reference pads to a multiple of 8.
ODD_CONFIG = dict(vocab_size=101, hidden_size=48, num_hidden_layers=2, num_attention_heads=4,
                  intermediate_size=37, max_position_embeddings=80, attention_window=[4, 8],
                  pad_token_id=PAD, type_vocab_size=1, hidden_act="gelu_new")


def batch(lengths=(40, 23, 31), seed: int = 0, global_rows=True):
  inputs = hf_helpers.padded_batch(101, lengths=lengths, type_vocab_size=1, seed=seed,
                                   first_id=PAD + 1, pad_id=PAD)
  if global_rows:  # [CLS] everywhere, a "question" in row 0, one late token in row 2
    glob = np.zeros_like(inputs["input_ids"])
    glob[:, 0] = 1
    glob[0, 5:8] = 1
    glob[-1, lengths[-1] - 1] = 1
    inputs["global_attention_mask"] = glob
  return inputs


def question_batch(lengths=(40, 23, 31), question=(5, 3, 8), seed: int = 0):
  """<s> question </s></s> context </s>, padded: the layout whose question (before the first
  </s>, SEP) the task classes give global attention when no global_attention_mask is given."""
  inputs = hf_helpers.padded_batch(101, lengths=lengths, type_vocab_size=1, seed=seed,
                                   first_id=SEP + 1, pad_id=PAD)
  for row, (length, q) in enumerate(zip(lengths, question)):
    inputs["input_ids"][row, [0, q + 1, q + 2, length - 1]] = [0, SEP, SEP, SEP]
  return inputs


QUESTIONS = dict(inputs=[batch(), question_batch()], export_inputs=[question_batch(seed=3)])
CHOICES = {"inputs": [{k: v.reshape(2, 2, -1) for k, v in question_batch(
    (40, 23, 31, 17), (5, 3, 8, 2)).items()}]}
CASES = parity.table(
    parity.Case(transformers.LongformerForMaskedLM, ODD_CONFIG, ("logits", "hidden_states"),
                [batch(), batch(global_rows=False)], export_inputs=[batch(seed=3)],
                expect={"config.attention.window": (2, 4)},
                expect_exported={"attention_window": [4, 8]}),
    parity.Case(transformers.LongformerModel, ODD_CONFIG, ("last_hidden_state", "pooler_output"),
                [batch(lengths=(37, 29), seed=1)], seed=1),  # padded inside to 40
    # With global attention given and chosen by default (see question_batch).
    *parity.task_cases("Longformer", ODD_CONFIG, QUESTIONS, CHOICES, seed=2),
)
test_matches_transformers_and_round_trips = parity.parametrized(CASES)


def test_sizes():
  cfg = longformer.longformer_base()
  assert (cfg.num_layers, cfg.hidden_size, cfg.attention.window) == (12, 768, 256)
  assert cfg.max_position_embeddings == 4098 and cfg.attention.global_tokens == ()
