"""BigBird equals transformers' BigBirdForMaskedLM / ForPreTraining / Model and the task classes
(block-sparse, random weights, non-default sizes), in eval mode (random blocks at block 0) and in training mode
(numpy plan seeded by the layer index), through from_hf / to_hf."""
import jax
import jax.numpy as jnp
import numpy as np
import transformers

from bertjax.layers.long_attention import sparse
from bertjax.models import bert, bigbird
from tests.helpers import hf as hf_helpers, parity

# 4-token blocks, 2 random blocks: block-sparse runs above (5 + 2 * 2) * 4 = 36 tokens.
ODD_CONFIG = dict(vocab_size=101, hidden_size=48, num_hidden_layers=2, num_attention_heads=4,
                  intermediate_size=37, max_position_embeddings=128, block_size=4,
                  num_random_blocks=2, attention_type="block_sparse", hidden_act="gelu_new",
                  hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)


def question_batch(lengths=(48, 30, 41), sep=66):
  """Rows without token types whose first [SEP] ends a question of 4, 7 and 2 tokens."""
  inputs = hf_helpers.padded_batch(101, lengths=lengths, type_vocab_size=0, seed=4)
  inputs["input_ids"][inputs["input_ids"] == sep] = sep + 1
  inputs["input_ids"][[0, 1, 2], [4, 7, 2]] = sep
  return inputs


CASES = parity.table(
    # 12 blocks, padded rows; in eval mode (random blocks at block 0) and in training mode
    # (dropout 0: every layer's own seeded random plan).
    parity.Case(transformers.BigBirdForMaskedLM, ODD_CONFIG, ("logits", "hidden_states"),
                [hf_helpers.padded_batch(101, lengths=(48, 30, 41))], training_mode=True,
                export_inputs=[hf_helpers.padded_batch(101, lengths=(44, 40), seed=3)],
                expect={"family.name": "big_bird", "config.attention.eval_plan": "zeros"},
                expect_exported={"attention_type": "block_sparse", "block_size": 4}),
    parity.Case(transformers.BigBirdForPreTraining, ODD_CONFIG,
                ("prediction_logits", "seq_relationship_logits", "hidden_states"),
                [hf_helpers.padded_batch(101, lengths=(48, 30, 41))]),
    # Padded 45 -> 48 (sparse); 30 <= 36 (full attention).
    parity.Case(transformers.BigBirdModel, ODD_CONFIG, ("last_hidden_state", "pooler_output"),
                [hf_helpers.padded_batch(101, lengths=(45, 38, 20), seed=3),
                 hf_helpers.padded_batch(101, lengths=(30, 12), seed=2)], seed=1),
    # Block-sparse rows (multiple choice: 2 x 3 of them); the question answering head finds
    # each question's end at its first [SEP] (id 66).
    *parity.task_cases("BigBird", ODD_CONFIG,
                       {"inputs": [hf_helpers.padded_batch(101, lengths=(48, 30, 41))]},
                       {"inputs": [parity.choice_batch(101, lengths=(48, 30, 41, 44, 20, 37))]},
                       seed=2),
    # No token_type_ids: the question (up to the first [SEP]) is type 0, the rest type 1.
    parity.Case(transformers.BigBirdForQuestionAnswering, ODD_CONFIG,
                ("start_logits", "end_logits"), [question_batch()],
                name="BigBirdForQuestionAnswering-question_types"),
)
test_matches_transformers_and_round_trips = parity.parametrized(CASES)


def test_sizes_and_any_bert_encoder_takes_the_attention():
  cfg = bigbird.bigbird_roberta_base()
  assert (cfg.num_layers, cfg.hidden_size, cfg.attention.block_size) == (12, 768, 64)
  tiny = bert.bert_tiny(vocab_size=64, max_position_embeddings=256,
                        attention=sparse.BigBird(block_size=8, num_random_blocks=1))
  model = bert.BertForMaskedLM(tiny)
  ids = jax.random.randint(jax.random.PRNGKey(1), (2, 128), 0, 64)
  segments = jnp.asarray([[1] * 128, [1] * 70 + [2] * 58])
  out = jax.jit(lambda: model.apply(model.init(jax.random.PRNGKey(0), ids), ids,
                                    segment_ids=segments)["logits"])()
  assert out.shape == (2, 128, 64) and np.isfinite(out).all()
