"""BERT equals transformers' PyTorch BERT, through from_hf / to_hf."""
import json

import jax
import numpy as np
import pytest
import transformers

import bertjax
from bertjax.models import bert
from tests.helpers import hf as hf_helpers, parity

ODD_CONFIG = dict(vocab_size=101, hidden_size=48, num_hidden_layers=3, num_attention_heads=3,
                  intermediate_size=37, max_position_embeddings=40, type_vocab_size=3,
                  hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1)

ENCODER_BATCHES = parity.encoder_batches(ODD_CONFIG["vocab_size"], type_vocab_size=3)
CASES = parity.table(
    parity.Case(transformers.BertModel, ODD_CONFIG,
                ("last_hidden_state", "pooler_output", "hidden_states"), **ENCODER_BATCHES),
    parity.Case(transformers.BertForPreTraining, ODD_CONFIG,
                ("prediction_logits", "seq_relationship_logits", "hidden_states"),
                **ENCODER_BATCHES),
    parity.Case(transformers.BertForMaskedLM, ODD_CONFIG, ("logits", "hidden_states"),
                **ENCODER_BATCHES),
    *parity.task_cases("Bert", ODD_CONFIG, ENCODER_BATCHES, parity.choice_batches(
        ODD_CONFIG["vocab_size"], type_vocab_size=3)),
    # num_labels = 1: regression, read as such by transformers (problem_type).
    parity.Case(transformers.BertForSequenceClassification,
                dict(ODD_CONFIG, num_labels=1, problem_type="regression"), ("logits",),
                **ENCODER_BATCHES, name="BertForSequenceClassification-regression",
                expect={"config.labels": ("LABEL_0",), "config.problem_type": "regression"},
                expect_exported={"num_labels": 1, "problem_type": "regression"}),
)
test_matches_transformers_and_round_trips = parity.parametrized(CASES)


def test_dropout_uses_explicit_rng(tmp_path):
  _, path = parity.save_reference(CASES["BertForMaskedLM"], tmp_path)
  ours = bertjax.from_hf(path)
  ids = hf_helpers.padded_batch(ODD_CONFIG["vocab_size"])["input_ids"]
  run = lambda key: ours.module.apply({"params": ours.params}, ids, deterministic=False,
                                      rngs={"dropout": key})["logits"]
  a, b, c = run(jax.random.PRNGKey(0)), run(jax.random.PRNGKey(0)), run(jax.random.PRNGKey(1))
  np.testing.assert_array_equal(a, b)
  assert np.abs(np.asarray(a) - np.asarray(c)).max() > 1e-3


def test_missing_config_is_named(tmp_path):
  with pytest.raises(FileNotFoundError, match="config.json"):
    bertjax.from_hf(tmp_path)


def test_unsupported_model_type_lists_supported(tmp_path):
  (tmp_path / "config.json").write_text(json.dumps({"model_type": "mystery"}))
  with pytest.raises(ValueError, match=r"'mystery' is not supported.*'bert'"):
    bertjax.from_hf(tmp_path)


def test_unsupported_architecture_is_named(tmp_path):
  _, path = parity.save_reference(CASES["BertModel"], tmp_path)
  config = json.loads((path / "config.json").read_text())
  config["architectures"] = ["BertForQuantumChemistry"]
  (path / "config.json").write_text(json.dumps(config))
  with pytest.raises(ValueError, match="BertForQuantumChemistry.*supported"):
    bertjax.from_hf(path)


def test_shape_mismatch_names_tensor_and_shapes(tmp_path):
  _, path = parity.save_reference(CASES["BertModel"], tmp_path)
  config = json.loads((path / "config.json").read_text())
  config["intermediate_size"] = 64
  (path / "config.json").write_text(json.dumps(config))
  with pytest.raises(ValueError, match=r"intermediate\.dense\.weight.*\(37, 48\).*\(64, 48\)"):
    bertjax.from_hf(path)


def test_missing_weights_file_is_named(tmp_path):
  _, path = parity.save_reference(CASES["BertModel"], tmp_path)
  (path / "model.safetensors").unlink()
  with pytest.raises(FileNotFoundError, match="model.safetensors"):
    bertjax.from_hf(path)


@pytest.mark.parametrize("size", sorted(bert.SIZES))
def test_parameter_counts_equal_reference(size):
  cfg = bert.SIZES[size]()
  hf_config = transformers.BertConfig(
      hidden_size=cfg.hidden_size, num_hidden_layers=cfg.num_layers,
      num_attention_heads=cfg.num_heads, intermediate_size=cfg.intermediate_size)
  # Tied decoder weight/bias are shared tensors, counted once, as parameters() does.
  assert (hf_helpers.parameter_count(
      lambda: bert.init_params(bert.BertForPreTraining(cfg), jax.random.PRNGKey(0)))
          == hf_helpers.reference_parameter_count(transformers.BertForPreTraining, hf_config))
