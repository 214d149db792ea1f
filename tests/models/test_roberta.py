"""RoBERTa equals transformers' RobertaModel / RobertaForMaskedLM, through from_hf / to_hf."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
import transformers

import bertjax
from bertjax.models import bert, roberta
from tests.helpers import hf as hf_helpers, parity, pretraining as pretraining_helpers

PAD = 1
ODD_CONFIG = dict(vocab_size=103, hidden_size=48, num_hidden_layers=3, num_attention_heads=4,
                  intermediate_size=37, max_position_embeddings=40, type_vocab_size=1,
                  layer_norm_eps=1e-5, pad_token_id=PAD, hidden_act="gelu_new")

# Right-padded with RoBERTa's pad id (1); real tokens never equal to it.
ROBERTA_BATCHES = parity.encoder_batches(ODD_CONFIG["vocab_size"], type_vocab_size=1,
                                         first_id=PAD + 1, pad_id=PAD)
ROBERTA = dict(expect={"family.name": "roberta"}, expect_exported={"pad_token_id": PAD},
               **ROBERTA_BATCHES)
CASES = parity.table(
    parity.Case(transformers.RobertaModel, ODD_CONFIG,
                ("last_hidden_state", "pooler_output", "hidden_states"), **ROBERTA),
    parity.Case(transformers.RobertaForMaskedLM, ODD_CONFIG, ("logits", "hidden_states"),
                **ROBERTA),
    *parity.task_cases("Roberta", ODD_CONFIG, ROBERTA_BATCHES, parity.choice_batches(
        ODD_CONFIG["vocab_size"], type_vocab_size=1, first_id=PAD + 1, pad_id=PAD),
                       expect={"family.name": "roberta"}),
)
test_matches_transformers_and_round_trips = parity.parametrized(CASES)


def test_position_ids_match_reference():
  ids = ROBERTA_BATCHES["inputs"][0]["input_ids"]
  expected = transformers.models.roberta.modeling_roberta.RobertaEmbeddings \
      .create_position_ids_from_input_ids(torch.as_tensor(ids), PAD).numpy()
  np.testing.assert_array_equal(roberta.position_ids_from_input_ids(jnp.asarray(ids), PAD),
                                expected)
  # Contract positions (0-based) land on the same rows for the real tokens.
  mask = ROBERTA_BATCHES["inputs"][0]["attention_mask"]
  contract = (np.cumsum(mask, -1) - 1) * mask
  shifted = np.asarray(roberta.offset_position_ids(jnp.asarray(ids), PAD, jnp.asarray(contract)))
  np.testing.assert_array_equal(np.where(mask == 1, shifted, PAD), expected)


def test_packed_rows_restart_positions(tmp_path):
  """Two examples packed in one row give the same outputs as each one alone."""
  ours = bertjax.from_hf(parity.save_reference(CASES["RobertaModel"], tmp_path)[1])
  run = jax.jit(lambda ids, **kw: ours.module.apply({"params": ours.params}, ids,
                                                    **kw)["last_hidden_state"])
  a, b = np.array([[0, 5, 6, 7, 2]]), np.array([[0, 9, 8, 2]])
  out = run(np.concatenate([a, b], -1), position_ids=np.array([[0, 1, 2, 3, 4, 0, 1, 2, 3]]),
            segment_ids=np.array([[1] * 5 + [2] * 4]))
  alone_a, alone_b = run(a), run(b)
  np.testing.assert_allclose(out[:, :5], alone_a, atol=1e-4)
  np.testing.assert_allclose(out[:, 5:], alone_b, atol=1e-4)


@pytest.mark.parametrize("size", sorted(roberta.SIZES))
def test_parameter_counts_equal_reference(size):
  cfg = roberta.SIZES[size]()
  hf_config = transformers.RobertaConfig(
      hidden_size=cfg.hidden_size, num_hidden_layers=cfg.num_layers,
      num_attention_heads=cfg.num_heads, intermediate_size=cfg.intermediate_size,
      max_position_embeddings=514, type_vocab_size=1)
  assert (hf_helpers.parameter_count(
      lambda: bert.init_params(roberta.RobertaForMaskedLM(cfg), jax.random.PRNGKey(0)))
          == hf_helpers.reference_parameter_count(transformers.RobertaForMaskedLM, hf_config))


@pytest.mark.slow
def test_trains_under_its_gin_recipe(tmp_path):
  """runs/roberta_pretrain.gin + models/roberta_base.gin + objectives/roberta_mlm.gin
  (dynamic masking, FULL-SENTENCES, AdamW b2 0.98) on the embedded corpus, shrunk."""
  records = pretraining_helpers.train(
      tmp_path, ["runs/roberta_pretrain.gin", "models/roberta_base.gin",
                 "objectives/roberta_mlm.gin"],
      [f"build_model.config_overrides = {{{pretraining_helpers.TINY}}}"])
  operative = (tmp_path / "operative_config.gin").read_text()
  assert "adamw.b2 = 0.98" in operative and "'roberta_mlm'" in operative
  loss = pretraining_helpers.early_late(records, "loss")
  accuracy = pretraining_helpers.early_late(records, "mlm_accuracy")
  assert loss[1] < loss[0] - 0.2 and accuracy[1] > accuracy[0] + 0.01, (loss, accuracy)
