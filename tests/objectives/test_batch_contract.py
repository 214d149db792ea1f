"""The batch-feature contract (bertjax.batch) as the objectives use it: every group names
contract features, objectives pass on only contract features, and a batch that lacks a
target, or a key that is not a feature, fails naming the reader and the feature."""
import re

import jax.numpy as jnp
import numpy as np
import pytest

from bertjax import batch as contract
from bertjax.objectives import causal_lm, distill, downstream, mlm, nsp, plm, rtd, sbo, seq2seq
from bertjax.sbert import losses as sbert_losses

GROUPS = {name: value for name, value in vars(contract).items()
          if name.isupper() and isinstance(value, tuple)}


@pytest.mark.parametrize("name", sorted(GROUPS))
def test_every_group_names_documented_features(name):
  group = GROUPS[name]
  assert group and len(set(group)) == len(group), name
  assert set(group) <= set(contract.FEATURES), name


def test_features_declare_dtype_rank_and_doc():
  for name, feature in contract.FEATURES.items():
    assert feature.dtype in ("int32", "float32", "float16") and feature.doc, name
    assert 0 <= feature.rank <= 3, name


OBJECTIVES = [mlm.MaskedLM(), nsp.bert_pretraining(), sbo.spanbert_pretraining(),
              rtd.ReplacedTokenDetection(), seq2seq.Seq2SeqLM(), causal_lm.CausalLM(),
              plm.PermutationLM(), distill.Distillation(), distill.DistilBertLoss(),
              distill.LogitRegression(), downstream.Classification(),
              downstream.SpanExtraction(), sbert_losses.SoftmaxLoss()]


@pytest.mark.parametrize("objective", OBJECTIVES, ids=lambda o: type(o).__name__)
def test_model_inputs_are_contract_features_the_batch_holds(objective):
  batch = {name: np.zeros((2,) + (3,) * feature.rank, np.dtype(feature.dtype))
           for name, feature in contract.FEATURES.items()}
  batch["junk"] = np.zeros((2, 3), np.int32)
  inputs = objective.model_inputs(batch)
  assert "input_ids" in inputs and "junk" not in inputs
  assert set(inputs) <= set(contract.FEATURES)


@pytest.mark.parametrize("objective, outputs, reader, missing", [
    (mlm.MaskedLM(), {"prediction_logits": jnp.zeros((1, 4, 5))}, "MaskedLM",
     "['mlm_targets', 'mlm_weights']"),
    (nsp.SentencePair(), {"seq_relationship_logits": jnp.zeros((1, 2))}, "SentencePair",
     "['next_sentence_label']"),
    (seq2seq.Seq2SeqLM(), {"logits": jnp.zeros((1, 4, 5))}, "Seq2SeqLM",
     "['labels', 'label_weights']"),
    (plm.PermutationLM(), {"logits": jnp.zeros((1, 2, 5))}, "PermutationLM",
     "['target_ids', 'target_weights']"),
    (downstream.SpanExtraction(), {"start_logits": jnp.zeros((1, 4)),
                                   "end_logits": jnp.zeros((1, 4))}, "SpanExtraction",
     "['start_positions', 'end_positions']"),
    (downstream.TokenClassification(), {"logits": jnp.zeros((1, 4, 3))}, "TokenClassification",
     "['labels', 'label_weights']"),
    (sbert_losses.SoftmaxLoss(), {"logits": jnp.zeros((1, 3))}, "SoftmaxLoss", "['label']"),
    (distill.LogitRegression(), {"logits": jnp.zeros((1, 2))}, "LogitRegression",
     "['teacher_logits']"),
    (sbert_losses.CosineSimilarityLoss(), {"embeddings": jnp.ones((1, 2, 4))},
     "CosineSimilarityLoss", "['score']"),
])
def test_a_missing_target_fails_naming_reader_and_feature(objective, outputs, reader, missing):
  batch = {"input_ids": np.ones((1, 4), np.int32)}
  with pytest.raises(ValueError, match=re.escape(f"{reader} reads batch features {missing}")):
    objective(outputs, batch)


def test_configured_feature_names_must_be_contract_features():
  with pytest.raises(ValueError, match=r"SentencePair.label_key: \['nsp_label'\]"):
    nsp.SentencePair(label_key="nsp_label")
  with pytest.raises(ValueError, match=r"Distillation.*\['class_id'\] are not batch features"):
    distill.Distillation(label_key="class_id", weight_key="mlm_weights")
  with pytest.raises(ValueError, match=r"\['sentence'\] are not batch features"):
    contract.task_features(("input_ids", "sentence"))
