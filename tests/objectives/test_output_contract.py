"""The model-output contract (bertjax.outputs): objectives read outputs by role, whatever
the architecture names them, and say what the model returned when it lacks the role."""
import jax
import numpy as np
import pytest

from bertjax import outputs as contract
from bertjax.objectives import mlm, nsp

LENGTH, VOCAB = 6, 11


def _mlm_batch():
  targets = np.zeros((2, LENGTH), np.int32)
  targets[:, 1], targets[0, 4] = 3, 7
  return {"input_ids": targets, "mlm_targets": targets,
          "mlm_weights": (targets > 0).astype(np.float32),
          "next_sentence_label": np.array([0, 1], np.int32),
          "attention_mask": np.ones((2, LENGTH), np.int32)}


def test_masked_lm_reads_either_name_of_its_role_with_the_same_loss():
  logits = jax.random.normal(jax.random.PRNGKey(0), (2, LENGTH, VOCAB))
  batch = _mlm_batch()
  as_pretraining, _ = mlm.MaskedLM()({"prediction_logits": logits}, batch)
  as_masked_lm, _ = mlm.MaskedLM()({"logits": logits, "last_hidden_state": None}, batch)
  chosen, _ = mlm.MaskedLM(logits_key="sbo_logits")({"sbo_logits": logits}, batch)
  assert float(as_pretraining) == float(as_masked_lm) == float(chosen) > 0


def test_sentence_pair_reads_nsp_or_sop_logits():
  logits = jax.random.normal(jax.random.PRNGKey(1), (2, 2))
  batch = _mlm_batch()
  nsp_loss, _ = nsp.SentencePair()({"seq_relationship_logits": logits}, batch)
  sop_loss, _ = nsp.SentencePair(name="sop")({"sop_logits": logits}, batch)
  assert float(nsp_loss) == float(sop_loss) > 0


def test_a_missing_or_ambiguous_role_names_what_the_model_returned():
  logits = np.zeros((2, LENGTH, VOCAB), np.float32)
  with pytest.raises(ValueError, match=r"'prediction_logits' or 'logits'.*\['sbo_logits'\]"):
    mlm.MaskedLM()({"sbo_logits": logits}, _mlm_batch())
  with pytest.raises(ValueError, match=r"\['prediction_logits', 'logits'\].*logits_key"):
    mlm.MaskedLM()({"prediction_logits": logits, "logits": logits}, _mlm_batch())
  with pytest.raises(ValueError, match="not model outputs"):
    contract.read({}, ("token_logits",), "Test")


def test_every_role_names_contract_outputs():
  for role in (contract.MASKED_LM_LOGITS, contract.SENTENCE_PAIR_LOGITS):
    assert set(role) <= set(contract.OUTPUTS)
  assert all(isinstance(doc, str) and doc for doc in contract.OUTPUTS.values())
