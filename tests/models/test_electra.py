"""ELECTRA equals transformers' PyTorch ELECTRA through from_hf / to_hf; the joint
generator + discriminator shares embeddings and exports its discriminator."""
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import transformers

import bertjax
from bertjax.checkpoints import run_model
from bertjax.models import bert, electra
from tests.helpers import hf as hf_helpers, parity

# E != H exercises embeddings_project; odd sizes catch transposed / reshaped kernels.
ODD_CONFIG = dict(vocab_size=101, embedding_size=20, hidden_size=48, num_hidden_layers=3,
                  num_attention_heads=3, intermediate_size=37, max_position_embeddings=40,
                  type_vocab_size=3, hidden_act="gelu_new")

ELECTRA = parity.encoder_batches(ODD_CONFIG["vocab_size"], type_vocab_size=3)
CASES = parity.table(
    parity.Case(transformers.ElectraModel, ODD_CONFIG, ("last_hidden_state", "hidden_states"),
                **ELECTRA),
    parity.Case(transformers.ElectraForPreTraining, ODD_CONFIG, ("logits", "hidden_states"),
                **ELECTRA),
    parity.Case(transformers.ElectraForMaskedLM, ODD_CONFIG, ("logits", "hidden_states"),
                **ELECTRA),
    # Equal embedding and hidden sizes: no embeddings_project at all.
    parity.Case(transformers.ElectraForPreTraining, dict(ODD_CONFIG, embedding_size=48),
                ("logits", "hidden_states"),
                [hf_helpers.padded_batch(ODD_CONFIG["vocab_size"], type_vocab_size=3, seed=2)],
                name="ElectraForPreTraining-no_projection",
                expect={"params.electra.embeddings_project": parity.MISSING}),
    *parity.task_cases("Electra", ODD_CONFIG, ELECTRA, parity.choice_batches(
        ODD_CONFIG["vocab_size"], type_vocab_size=3)),
)
test_matches_transformers_and_round_trips = parity.parametrized(CASES)


TINY = electra.ElectraConfig(vocab_size=61, embedding_size=16, hidden_size=32, num_layers=2,
                             num_heads=4, intermediate_size=48, max_position_embeddings=24,
                             generator_fraction=0.5)


def test_generator_is_a_fraction_of_the_discriminator():
  gen = TINY.generator_config()
  assert (gen.hidden_size, gen.num_heads, gen.intermediate_size) == (16, 2, 24)
  assert gen.num_layers == TINY.num_layers and gen.embedding_size == TINY.embedding_size
  with pytest.raises(ValueError, match="generator_fraction"):
    electra.ElectraConfig(generator_fraction=0.0)


@functools.lru_cache(maxsize=None)
def _init(cfg=TINY, seed=0):
  """(module, params); cached because tracing an init costs seconds on this CPU."""
  model = electra.ElectraGeneratorDiscriminator(cfg)
  return model, jax.jit(lambda key: bert.init_params(model, key))(jax.random.PRNGKey(seed))


def _joint_batch(seed=0, batch=3, length=12):
  rng = np.random.default_rng(seed)
  ids = rng.integers(5, TINY.vocab_size, (batch, length)).astype(np.int32)
  weights = (rng.random((batch, length)) < 0.3).astype(np.float32)
  return {"input_ids": np.where(weights > 0, 4, ids).astype(np.int32),
          "attention_mask": np.ones((batch, length), np.int32),
          "mlm_targets": np.where(weights > 0, ids, 0).astype(np.int32), "mlm_weights": weights}


def test_joint_model_shares_embeddings_and_replaces_only_masked_tokens():
  model, params = _init()
  assert "embeddings" not in params["generator"] and "embeddings" not in params["discriminator"]
  assert "embeddings_project" not in params["generator"]  # generator width 16 == E
  assert params["discriminator"]["embeddings_project"]["kernel"].shape == (16, 32)
  batch = _joint_batch()
  apply = jax.jit(lambda key: model.apply({"params": params}, **batch, rngs={"sample": key}))
  out = apply(jax.random.PRNGKey(3))
  assert out["generator_logits"].shape == (3, 12, TINY.vocab_size)
  assert out["discriminator_logits"].shape == (3, 12)
  masked = batch["mlm_weights"] > 0
  np.testing.assert_array_equal(np.asarray(out["corrupted_ids"])[~masked],
                                batch["input_ids"][~masked])
  assert not np.asarray(out["replaced"])[~masked].any()
  # Label = "differs from the original", so a correct sample is labelled original.
  expected = np.where(masked, np.asarray(out["corrupted_ids"]) != batch["mlm_targets"], False)
  np.testing.assert_array_equal(np.asarray(out["replaced"]).astype(bool), expected)
  # Sampling follows the 'sample' stream.
  again = apply(jax.random.PRNGKey(4))
  assert (np.asarray(again["corrupted_ids"]) != np.asarray(out["corrupted_ids"])).any()


def test_discriminator_export_loads_in_transformers(tmp_path):
  model, params = _init()
  bertjax.to_hf(run_model.export_discriminator(TINY, params), tmp_path / "disc")
  reloaded = transformers.ElectraForPreTraining.from_pretrained(tmp_path / "disc").eval()
  batch = _joint_batch(seed=1)
  # Without a 'sample' rng the sampling key is fixed.
  ours = jax.jit(lambda p: model.apply({"params": p}, **batch))(params)
  inputs = {"input_ids": np.asarray(ours["corrupted_ids"]),
            "attention_mask": batch["attention_mask"]}
  theirs = hf_helpers.torch_outputs(reloaded, inputs)
  diff = np.abs(theirs["logits"] - np.asarray(ours["discriminator_logits"])).max()
  assert diff <= 1e-5, diff
  # The generator exports too, with its narrower config.
  bertjax.to_hf(run_model.export_generator(TINY, params), tmp_path / "gen")
  generator = transformers.ElectraForMaskedLM.from_pretrained(tmp_path / "gen").eval()
  assert generator.config.hidden_size == 16
  gen_logits = hf_helpers.torch_outputs(generator, {k: batch[k] for k in inputs})
  assert np.abs(gen_logits["logits"] - np.asarray(ours["generator_logits"])).max() <= 1e-5


def test_two_stage_copies_generator_into_discriminator():
  _, params = _init(TINY.replace(generator_fraction=1.0))
  staged = electra.discriminator_from_generator(params)
  same = jax.tree.map(lambda a, b: bool(jnp.array_equal(a, b)), staged["discriminator"],
                      params["generator"])
  assert all(jax.tree.leaves(same))
  with pytest.raises(ValueError, match="generator_fraction = 1.0"):
    electra.discriminator_from_generator(_init()[1])


@pytest.mark.parametrize("size", sorted(electra.SIZES))
def test_discriminator_parameter_counts_equal_reference(size):
  cfg = electra.SIZES[size]()
  discriminator = electra.ElectraForPreTraining(cfg)
  hf_config = transformers.ElectraConfig(
      embedding_size=cfg.embedding_size, hidden_size=cfg.hidden_size,
      num_hidden_layers=cfg.num_layers, num_attention_heads=cfg.num_heads,
      intermediate_size=cfg.intermediate_size)
  assert (hf_helpers.parameter_count(lambda: bert.init_params(discriminator,
                                                              jax.random.PRNGKey(0)))
          == hf_helpers.reference_parameter_count(transformers.ElectraForPreTraining, hf_config))
