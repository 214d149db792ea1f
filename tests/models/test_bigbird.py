"""BigBird equals transformers' BigBirdForMaskedLM / BigBirdModel (block-sparse, random
weights, non-default sizes), in eval mode (random blocks at block 0) and in training mode
(numpy plan seeded by the layer index), through from_hf / to_hf."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
import transformers

import bertjax
from bertjax.layers.long_attention import sparse
from bertjax.models import bert, bigbird
from tests.helpers import hf as hf_helpers

# 4-token blocks, 2 random blocks: block-sparse runs above (5 + 2 * 2) * 4 = 36 tokens.
ODD_CONFIG = dict(vocab_size=101, hidden_size=48, num_hidden_layers=2, num_attention_heads=4,
                  intermediate_size=37, max_position_embeddings=128, block_size=4,
                  num_random_blocks=2, attention_type="block_sparse", hidden_act="gelu_new",
                  hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)


def reference(cls, tmp_path, seed: int = 0):
  torch.manual_seed(seed)
  model = hf_helpers.redraw_weights(cls(transformers.BigBirdConfig(**ODD_CONFIG)), seed)
  model.save_pretrained(tmp_path / cls.__name__)
  return model, tmp_path / cls.__name__


def test_masked_lm_matches_transformers_eval_and_train(tmp_path):
  torch_model, path = reference(transformers.BigBirdForMaskedLM, tmp_path)
  ours = bertjax.from_hf(path)
  assert ours.family.name == "big_bird" and ours.config.attention.eval_plan == "zeros"
  inputs = hf_helpers.padded_batch(101, lengths=(48, 30, 41))  # 12 blocks, padded rows
  expected = hf_helpers.torch_outputs(torch_model, inputs, output_hidden_states=True)
  got = ours(**inputs, output_hidden_states=True)
  diffs = hf_helpers.max_abs_diff(got, expected, ("logits", "hidden_states"))
  assert max(diffs.values()) <= 1e-4, diffs
  assert np.std(got["logits"]) > 0.1

  # Training mode (dropout 0): every layer's own seeded random plan.
  expected = hf_helpers.torch_outputs(torch_model.train(), inputs)["logits"]
  got = ours.module.apply({"params": ours.params},
                          **{k: jnp.asarray(v) for k, v in inputs.items()}, deterministic=False)
  assert np.abs(np.asarray(got["logits"]) - expected).max() <= 1e-4


def test_model_pads_to_block_multiple_and_falls_back_when_short(tmp_path):
  torch_model, path = reference(transformers.BigBirdModel, tmp_path, seed=1)
  ours = bertjax.from_hf(path)
  for lengths in ((45, 38, 20), (30, 12)):  # padded 45 -> 48 (sparse); 30 <= 36 (full)
    inputs = hf_helpers.padded_batch(101, lengths=lengths, seed=len(lengths))
    expected = hf_helpers.torch_outputs(torch_model, inputs)
    diffs = hf_helpers.max_abs_diff(ours(**inputs), expected,
                                    ("last_hidden_state", "pooler_output"))
    assert max(diffs.values()) <= 1e-4, (lengths, diffs)


def test_export_round_trip_loads_in_transformers(tmp_path):
  torch_model, path = reference(transformers.BigBirdForMaskedLM, tmp_path, seed=2)
  bertjax.to_hf(bertjax.from_hf(path), tmp_path / "exported")
  reloaded = transformers.BigBirdForMaskedLM.from_pretrained(tmp_path / "exported").eval()
  assert reloaded.config.attention_type == "block_sparse" and reloaded.config.block_size == 4
  inputs = hf_helpers.padded_batch(101, lengths=(44, 40), seed=3)
  diffs = hf_helpers.max_abs_diff(hf_helpers.torch_outputs(reloaded, inputs),
                                  hf_helpers.torch_outputs(torch_model, inputs), ("logits",))
  assert max(diffs.values()) <= 1e-5, diffs


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
