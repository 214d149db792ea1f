"""Rotary positions: transformers' rotation exactly, and attention that sees offsets only."""
from hypothesis import given, settings, strategies as st
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bertjax.layers import rotary
from bertjax.models import bert


def test_rotation_equals_transformers_apply_rotary_pos_emb():
  torch = pytest.importorskip("torch")
  from transformers.models.modernbert import modeling_modernbert as reference
  rng = np.random.default_rng(0)
  q, k = rng.normal(size=(2, 2, 7, 3, 10)).astype(np.float32)  # [B, L, heads, d]
  positions = np.array([[0, 1, 2, 3, 4, 5, 6], [0, 1, 2, 0, 1, 2, 3]])  # packed: restarts
  base = 160.0
  inv_freq = 1.0 / base ** (np.arange(0, 10, 2, dtype=np.float32) / 10)
  freqs = positions[..., None].astype(np.float32) * inv_freq
  emb = np.concatenate([freqs, freqs], axis=-1)
  want_q, want_k = reference.apply_rotary_pos_emb(
      torch.tensor(q), torch.tensor(k), torch.tensor(np.cos(emb)), torch.tensor(np.sin(emb)),
      unsqueeze_dim=2)
  got_q = rotary.rotate(jnp.asarray(q), jnp.asarray(positions), base)
  got_k = rotary.rotate(jnp.asarray(k), jnp.asarray(positions), base)
  np.testing.assert_allclose(got_q, want_q.numpy(), atol=1e-6)
  np.testing.assert_allclose(got_k, want_k.numpy(), atol=1e-6)


@settings(max_examples=20, deadline=None)
@given(st.integers(0, 500), st.integers(0, 500), st.integers(-20, 20))
def test_scores_depend_only_on_the_offset(i, j, shift):
  rng = np.random.default_rng(1)
  q, k = (jnp.asarray(rng.normal(size=(1, 1, 1, 8)), jnp.float32) for _ in range(2))
  score = lambda a, b: float(jnp.sum(rotary.rotate(q, jnp.array([[a]]), 10000.0)
                                     * rotary.rotate(k, jnp.array([[b]]), 10000.0)))
  i2, j2 = i + abs(shift), j + abs(shift)
  assert score(i, j) == pytest.approx(score(i2, j2), abs=1e-3)


def test_bad_head_sizes_and_bases_are_refused():
  with pytest.raises(ValueError, match="even head_dim"):
    rotary.frequencies(7, 10000.0)
  with pytest.raises(ValueError, match="base must be > 0"):
    rotary.frequencies(8, 0.0)


def test_rotary_bert_has_no_position_table_and_reads_positions_per_packed_example():
  config = bert.BertConfig(vocab_size=50, hidden_size=32, num_layers=2, num_heads=4,
                           intermediate_size=64, position_embedding="rotary",
                           pre_norm=True, hidden_dropout=0.0, attention_dropout=0.0)
  model = bert.BertModel(config)
  params = bert.init_params(model, jax.random.key(0), length=6)
  assert "position_embeddings" not in params["embeddings"] and "final_norm" in params
  assert config.max_positions is None  # no table to run past
  ids = jax.random.randint(jax.random.key(1), (1, 6), 1, 50)
  alone = model.apply({"params": params}, ids[:, :3])["last_hidden_state"]
  packed = model.apply({"params": params}, ids.at[:, 3:].set(ids[:, :3]),
                       segment_ids=jnp.array([[1, 1, 1, 2, 2, 2]]),
                       position_ids=jnp.array([[0, 1, 2, 0, 1, 2]]))["last_hidden_state"]
  np.testing.assert_allclose(packed[:, :3], alone, atol=1e-5)
  np.testing.assert_allclose(packed[:, 3:], alone, atol=1e-5)
  with pytest.raises(ValueError, match="position_embedding='learned'"):
    bert.bert_tiny(position_embedding="learned")


@pytest.mark.parametrize("family, overrides", [
    ("bert", {"position_embedding": "rotary"}), ("bert", {"pre_norm": True}),
    ("electra", {"position_embedding": "rotary"}), ("gpt", {"position_embedding": "rotary"})])
def test_research_variants_train_but_refuse_to_export(tmp_path, family, overrides):
  import bertjax
  from bertjax.checkpoints import model as hf_model
  from bertjax.models import electra, gpt
  small = dict(vocab_size=50, hidden_size=32, num_layers=1, num_heads=2, intermediate_size=64)
  module, name = {
      "bert": (bert.BertForMaskedLM(bert.BertConfig(**small, **overrides)), "BertForMaskedLM"),
      "electra": (electra.ElectraForPreTraining(electra.ElectraConfig(
          **small, embedding_size=16, **overrides)), "ElectraForPreTraining"),
      "gpt": (gpt.GPTLMHeadModel(gpt.GPTConfig(**small, **overrides)), "GPT2LMHeadModel")}[family]
  ids = jnp.ones((1, 5), jnp.int32)
  params = module.init(jax.random.key(0), ids)["params"]
  assert np.isfinite(module.apply({"params": params}, ids)["logits"]).all()
  family_of = {"bert": "bert", "electra": "electra", "gpt": "gpt2"}[family]
  opened = hf_model.HFModel(hf_model.registry.family_for(family_of), name, module.config, module,
                            params)
  with pytest.raises(ValueError, match="research variant .* cannot be exported"):
    bertjax.to_hf(opened, tmp_path / "export")
  assert not (tmp_path / "export").exists()
  with pytest.raises(ValueError, match="absolute positions and post-LN only"):
    from bertjax.models import deberta
    deberta.DebertaConfig(position_embedding="rotary")
