"""RoBERTa equals transformers' RobertaModel / RobertaForMaskedLM, through from_hf / to_hf."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
import transformers

import bertjax
from bertjax.models import bert, roberta
from tests.helpers import hf as hf_helpers, pretraining as pretraining_helpers

PAD = 1
ODD_CONFIG = dict(vocab_size=103, hidden_size=48, num_hidden_layers=3, num_attention_heads=4,
                  intermediate_size=37, max_position_embeddings=40, type_vocab_size=1,
                  layer_norm_eps=1e-5, pad_token_id=PAD, hidden_act="gelu_new")

ARCHITECTURES = {
    "RobertaModel": (transformers.RobertaModel, ("last_hidden_state", "pooler_output")),
    "RobertaForMaskedLM": (transformers.RobertaForMaskedLM, ("logits",)),
}


def reference(architecture: str, tmp_path, seed: int = 0):
  cls, _ = ARCHITECTURES[architecture]
  torch.manual_seed(seed)
  model = hf_helpers.redraw_weights(cls(transformers.RobertaConfig(**ODD_CONFIG)), seed)
  model.save_pretrained(tmp_path / architecture)
  return model, tmp_path / architecture


def roberta_batch(seed: int = 0):
  """A right-padded batch padded with RoBERTa's pad id (1), real tokens never equal to it."""
  inputs = hf_helpers.padded_batch(ODD_CONFIG["vocab_size"], type_vocab_size=1, seed=seed,
                                   first_id=2)
  inputs["input_ids"] = np.where(inputs["attention_mask"] == 1, inputs["input_ids"], PAD)
  return inputs


def test_position_ids_match_reference():
  ids = roberta_batch()["input_ids"]
  expected = transformers.models.roberta.modeling_roberta.RobertaEmbeddings \
      .create_position_ids_from_input_ids(torch.as_tensor(ids), PAD).numpy()
  np.testing.assert_array_equal(roberta.position_ids_from_input_ids(jnp.asarray(ids), PAD),
                                expected)
  # Contract positions (0-based) land on the same rows for the real tokens.
  mask = roberta_batch()["attention_mask"]
  contract = (np.cumsum(mask, -1) - 1) * mask
  shifted = np.asarray(roberta.offset_position_ids(jnp.asarray(ids), PAD, jnp.asarray(contract)))
  np.testing.assert_array_equal(np.where(mask == 1, shifted, PAD), expected)


@pytest.mark.parametrize("architecture", sorted(ARCHITECTURES))
def test_matches_transformers_on_padded_batch(architecture, tmp_path):
  torch_model, path = reference(architecture, tmp_path)
  ours = bertjax.from_hf(path)
  assert ours.architecture == architecture and ours.family.name == "roberta"
  inputs = roberta_batch()
  expected = hf_helpers.torch_outputs(torch_model, inputs, output_hidden_states=True)
  got = ours(**inputs, output_hidden_states=True)
  keys = ARCHITECTURES[architecture][1] + ("hidden_states",)
  diffs = hf_helpers.max_abs_diff(got, expected, keys)
  assert max(diffs.values()) <= 1e-4, diffs
  assert np.std(got[keys[0]]) > 0.1


def test_export_round_trip_loads_in_transformers(tmp_path):
  torch_model, path = reference("RobertaForMaskedLM", tmp_path, seed=1)
  ours = bertjax.from_hf(path)
  bertjax.to_hf(ours, tmp_path / "exported")
  reloaded = transformers.RobertaForMaskedLM.from_pretrained(tmp_path / "exported").eval()
  assert reloaded.config.pad_token_id == PAD
  inputs = roberta_batch(seed=5)
  diffs = hf_helpers.max_abs_diff(hf_helpers.torch_outputs(reloaded, inputs),
                                  hf_helpers.torch_outputs(torch_model, inputs), ("logits",))
  assert max(diffs.values()) <= 1e-5, diffs


def test_packed_rows_restart_positions(tmp_path):
  """Two examples packed in one row give the same outputs as each one alone."""
  ours = bertjax.from_hf(reference("RobertaModel", tmp_path)[1])
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
  ours = jax.eval_shape(lambda: bert.init_params(roberta.RobertaForMaskedLM(cfg),
                                                 jax.random.PRNGKey(0)))
  hf_config = transformers.RobertaConfig(
      hidden_size=cfg.hidden_size, num_hidden_layers=cfg.num_layers,
      num_attention_heads=cfg.num_heads, intermediate_size=cfg.intermediate_size,
      max_position_embeddings=514, type_vocab_size=1)
  with torch.device("meta"):
    reference_model = transformers.RobertaForMaskedLM(hf_config)
  assert (sum(x.size for x in jax.tree_util.tree_leaves(ours))
          == sum(p.numel() for p in reference_model.parameters()))


@pytest.mark.slow
def test_trains_under_its_gin_recipe(tmp_path):
  """runs/roberta_pretrain.gin + models/roberta_base.gin + objectives/roberta_mlm.gin
  (dynamic masking, FULL-SENTENCES, AdamW b2 0.98) on the embedded corpus, shrunk."""
  records = pretraining_helpers.train(
      tmp_path, ["runs/roberta_pretrain.gin", "models/roberta_base.gin",
                 "objectives/roberta_mlm.gin"],
      [f"build_model.config_overrides = {{{pretraining_helpers.TINY}}}",
       # The tiny model's small WordPiece instead of the recipe's 50k byte-level BPE
       # (which tests/train/test_inputs.py checks the recipe selects).
       "bertjax.train.inputs.task_dataset.vocabulary = None"])
  operative = (tmp_path / "operative_config.gin").read_text()
  assert "adamw.b2 = 0.98" in operative and "'roberta_mlm'" in operative
  loss = pretraining_helpers.early_late(records, "loss")
  accuracy = pretraining_helpers.early_late(records, "mlm_accuracy")
  assert loss[1] < loss[0] - 0.2 and accuracy[1] > accuracy[0] + 0.01, (loss, accuracy)
