"""OpenAI GPT and GPT-2 against transformers: forward parity, export, and generate()."""
import numpy as np
import pytest
import torch
import transformers

import bertjax
from bertjax.models import gpt
from tests.helpers import hf as hf_helpers, parity

VOCAB = 97


GPT2_CONFIG = dict(vocab_size=VOCAB, n_embd=24, n_layer=3, n_head=4, n_positions=48, n_inner=40,
                   bos_token_id=5, eos_token_id=5)
OPENAI_CONFIG = dict(vocab_size=VOCAB, n_embd=24, n_layer=3, n_head=4, n_positions=48)
BATCH = hf_helpers.padded_batch(VOCAB, lengths=(11, 7, 3))
CASES = parity.table(
    parity.Case(transformers.GPT2LMHeadModel, GPT2_CONFIG, ("logits", "hidden_states"), [BATCH]),
    parity.Case(transformers.GPT2Model, GPT2_CONFIG, ("last_hidden_state", "hidden_states"),
                [BATCH]),
    parity.Case(transformers.OpenAIGPTLMHeadModel, OPENAI_CONFIG, ("logits", "hidden_states"),
                [BATCH]),
    parity.Case(transformers.OpenAIGPTModel, OPENAI_CONFIG, ("last_hidden_state", "hidden_states"),
                [BATCH]),
)
test_matches_transformers_and_round_trips = parity.parametrized(CASES)


def test_sizes_and_config_errors():
  assert gpt.gpt2_medium().num_layers == 24 and gpt.gpt2_xl().head_dim == 64
  assert not gpt.openai_gpt().pre_norm and gpt.ltr_base().vocab_size == 30522
  with pytest.raises(ValueError, match="multiple of num_heads"):
    gpt.GPTConfig(hidden_size=30, num_heads=4)
  from bertjax.models.gpt import hf as hf_gpt
  with pytest.raises(ValueError, match="scale_attn_by_inverse_layer_idx"):
    hf_gpt.GPT2Family().config_from_hf({"scale_attn_by_inverse_layer_idx": True})


@pytest.fixture(scope="module")
def gpt2_pair(tmp_path_factory):
  """A tiny GPT-2 whose weights keep generations varied (no early collapse to one token)."""
  path = tmp_path_factory.mktemp("gpt2_gen")
  model = hf_helpers.reference_model(transformers.GPT2LMHeadModel, dict(GPT2_CONFIG, n_layer=2),
                                     std=0.15)
  model.save_pretrained(path)
  return model, bertjax.from_hf(path)


def _prompts():
  rng = np.random.default_rng(1)
  ids = rng.integers(6, VOCAB, (3, 6))
  mask = np.ones_like(ids)
  mask[1, :2] = 0
  mask[2, :4] = 0  # left padding, as transformers expects for decoder-only batches
  return np.where(mask == 1, ids, 0), mask


GENERATE_SETTINGS = [
    dict(),
    dict(num_beams=4, length_penalty=2.0, num_return_sequences=2),
    dict(num_beams=3, early_stopping=True, length_penalty=0.5),
]


@pytest.mark.parametrize("settings", GENERATE_SETTINGS, ids=lambda s: str(s) or "greedy")
def test_generate_matches_transformers(gpt2_pair, settings):
  theirs_model, ours = gpt2_pair
  ids, mask = _prompts()
  common = dict(max_new_tokens=10, pad_token_id=0)
  # An EOS that the model does emit mid-way, so early stopping is exercised.
  plain = theirs_model.generate(torch.tensor(ids), attention_mask=torch.tensor(mask),
                                do_sample=False, **common).numpy()
  eos = int(plain[0, ids.shape[1] + 4])
  expected = theirs_model.generate(torch.tensor(ids), attention_mask=torch.tensor(mask),
                                   do_sample=False, eos_token_id=eos, **common,
                                   **settings).numpy()
  got = ours.generate(ids, mask, eos_token_id=eos, **common, **settings)
  np.testing.assert_array_equal(got, expected)


def test_generate_needs_lm_head(tmp_path):
  ours = bertjax.from_hf(parity.save_reference(CASES["GPT2Model"], tmp_path)[1])
  with pytest.raises(ValueError, match="no language-model head"):
    ours.generate(np.ones((1, 3), np.int64), max_new_tokens=2)
