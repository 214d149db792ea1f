"""Attention probabilities of every family equal transformers' eager attention
(`output_attentions=True`) on the parity tables' rows, padded batches included."""
import importlib

import numpy as np
import pytest

import bertjax
from tests.helpers import hf as hf_helpers, parity

# (family test module, row id of its parity table) -> the attention outputs compared.
ENCODER = ("attentions",)
SEQ2SEQ = ("encoder_attentions", "decoder_attentions", "cross_attentions")
ROWS = {
    ("test_bert", "BertModel"): ENCODER,
    ("test_roberta", "RobertaModel"): ENCODER,
    ("test_albert", "AlbertModel"): ENCODER,
    ("test_electra", "ElectraModel"): ENCODER,
    ("test_distilbert", "DistilBertModel"): ENCODER,
    ("test_deberta", "v1-Model"): ENCODER,
    ("test_deberta", "v3-Model"): ENCODER,
    ("test_gpt", "GPT2Model"): ENCODER,
    ("test_gpt", "OpenAIGPTModel"): ENCODER,
    ("test_xlnet", "XLNetModel"): ENCODER,
    ("test_t5", "T5Model-v1_1"): SEQ2SEQ,
    ("test_bart", "BartModel-scale_embedding_True"): SEQ2SEQ,
}
# Measured max abs differences are recorded in experiments/analysis/results.md.


def row(module: str, case_id: str) -> parity.Case:
  return importlib.import_module(f"tests.models.{module}").CASES[case_id]


def reference_and_ours(case: parity.Case, tmp_path):
  reference, path = parity.save_reference(case, tmp_path)
  reference.set_attn_implementation("eager")
  return reference, bertjax.from_hf(path)


@pytest.mark.parametrize("where", list(ROWS), ids=lambda where: where[1])
def test_attentions_equal_transformers_eager(where, tmp_path):
  case = row(*where)
  reference, ours = reference_and_ours(case, tmp_path)
  for inputs in case.inputs:
    theirs = hf_helpers.torch_outputs(reference, inputs, output_attentions=True)
    got = ours(**inputs, output_attentions=True)
    names = ROWS[where]
    assert set(names) <= set(got), sorted(got)
    parity.assert_close(got, theirs, names, 1e-4)
    for name in names:  # rows are distributions over the keys, and not uniform ones
      np.testing.assert_allclose(got[name].sum(-1), 1.0, atol=1e-5)
      assert got[name].std() > 0.05
