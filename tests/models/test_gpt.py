"""OpenAI GPT and GPT-2 against transformers: forward parity, export, and generate()."""
import numpy as np
import pytest
import torch
import transformers

import bertjax
from bertjax.models import gpt
from tests.helpers import hf as hf_helpers

VOCAB = 97


def _gpt2_config(**overrides):
  values = dict(vocab_size=VOCAB, n_embd=24, n_layer=3, n_head=4, n_positions=48, n_inner=40,
                bos_token_id=5, eos_token_id=5)
  return transformers.GPT2Config(**{**values, **overrides})


def _openai_config(**overrides):
  return transformers.OpenAIGPTConfig(**{**dict(vocab_size=VOCAB, n_embd=24, n_layer=3, n_head=4,
                                                n_positions=48), **overrides})


def _saved(model_cls, config, tmp_path, std=0.2):
  torch.manual_seed(0)
  model = hf_helpers.redraw_weights(model_cls(config), std=std)
  model.save_pretrained(tmp_path)
  return model, bertjax.from_hf(tmp_path)


CASES = [
    (transformers.GPT2LMHeadModel, _gpt2_config, "logits"),
    (transformers.GPT2Model, _gpt2_config, "last_hidden_state"),
    (transformers.OpenAIGPTLMHeadModel, _openai_config, "logits"),
    (transformers.OpenAIGPTModel, _openai_config, "last_hidden_state"),
]


@pytest.mark.parametrize("model_cls, make_config, key", CASES,
                         ids=[c[0].__name__ for c in CASES])
def test_parity_padded_batch_and_export(model_cls, make_config, key, tmp_path):
  theirs_model, ours = _saved(model_cls, make_config(), tmp_path / "hf")
  batch = hf_helpers.padded_batch(VOCAB, lengths=(11, 7, 3))
  theirs = hf_helpers.torch_outputs(theirs_model, batch, output_hidden_states=True)
  out = ours(**batch, output_hidden_states=True)
  diffs = hf_helpers.max_abs_diff(out, theirs, [key, "hidden_states"])
  assert max(diffs.values()) <= 1e-4, diffs

  bertjax.to_hf(ours, tmp_path / "back")
  back = model_cls.from_pretrained(tmp_path / "back").eval()
  again = hf_helpers.torch_outputs(back, batch)
  assert hf_helpers.max_abs_diff(again, theirs, [key])[key] <= 1e-5


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
  return _saved(transformers.GPT2LMHeadModel, _gpt2_config(n_layer=2), path, std=0.15)


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
  _, ours = _saved(transformers.GPT2Model, _gpt2_config(), tmp_path)
  with pytest.raises(ValueError, match="no language-model head"):
    ours.generate(np.ones((1, 3), np.int64), max_new_tokens=2)
