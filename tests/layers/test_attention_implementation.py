"""attention_implementation: the fused path gives the explicit path's outputs in every
dense encoder, analysis (head masks, recorded probabilities) always takes the explicit
path, and names, backends or attention the kernel cannot run fail with what to use
instead."""
from unittest import mock

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bertjax.layers import attention
from bertjax.layers.long_attention import sparse
from bertjax.models import albert, bert, deberta, electra, longformer


@pytest.fixture
def fused_on_cpu(monkeypatch):
  """'cudnn' routed to jax.nn.dot_product_attention's portable kernel, so the fused
  plumbing (masks, scaling, layout) runs here without a GPU."""
  real = jax.nn.dot_product_attention
  monkeypatch.setattr(jax.nn, "dot_product_attention",
                      lambda *a, implementation=None, **k: real(*a, implementation="xla", **k))
  monkeypatch.setattr(jax, "default_backend", lambda: "gpu")


def _model_and_inputs(**overrides):
  cfg = bert.bert_tiny(**overrides)
  params = bert.init_params(bert.BertModel(bert.bert_tiny()), jax.random.key(0))
  ids = jnp.arange(32, dtype=jnp.int32).reshape(2, 16) + 5
  mask = jnp.ones((2, 16), jnp.int32).at[1, 10:].set(0)
  return cfg, params, ids, mask


def test_fused_matches_explicit_and_analysis_stays_explicit(fused_on_cpu):
  cfg, params, ids, mask = _model_and_inputs()
  explicit = bert.BertModel(cfg).apply({"params": params}, ids, mask)["last_hidden_state"]
  fused_model = bert.BertModel(cfg.replace(attention_implementation="cudnn"))
  fused = fused_model.apply({"params": params}, ids, mask)["last_hidden_state"]
  np.testing.assert_allclose(fused, explicit, atol=2e-5)
  out, state = fused_model.apply({"params": params}, ids, mask, mutable=[attention.INTERMEDIATES])
  probs = jax.tree.leaves(state)[0]
  assert probs.shape == (2, 2, 2, 16, 16)  # [layers, batch, heads, q, k]: explicit path
  np.testing.assert_allclose(out["last_hidden_state"], explicit, atol=2e-5)


def test_fused_refuses_attention_dropout(fused_on_cpu):
  cfg, params, ids, mask = _model_and_inputs(attention_implementation="cudnn")
  with pytest.raises(ValueError, match="no attention dropout.*attention_dropout = 0"):
    bert.BertModel(cfg).apply({"params": params}, ids, mask, deterministic=False,
                              rngs={"dropout": jax.random.key(1)})


def test_bad_name_and_missing_gpu_are_explained():
  with pytest.raises(ValueError, match="attention_implementation='flash'.*'xla', 'cudnn'"):
    bert.bert_tiny(attention_implementation="flash")
  cfg, params, ids, mask = _model_and_inputs(attention_implementation="cudnn")
  if jax.default_backend() != "gpu":
    with pytest.raises(ValueError, match="needs an NVIDIA GPU.*Use 'xla'"):
      bert.BertModel(cfg).apply({"params": params}, ids, mask)


@pytest.mark.parametrize("family", ["albert", "electra"])
def test_every_dense_encoder_takes_the_fused_kernel(family, fused_on_cpu):
  """ALBERT's and ELECTRA's stacks read the config's kernel too (they once ran the explicit
  path whatever it said): the recorded fused call proves which path ran."""
  sizes = dict(vocab_size=60, hidden_size=16, num_layers=2, num_heads=2, intermediate_size=32,
               max_position_embeddings=32)
  make = {"albert": lambda **kw: albert.AlbertModel(albert.AlbertConfig(**sizes, embedding_size=8,
                                                                        **kw)),
          "electra": lambda **kw: electra.ElectraModel(electra.ElectraConfig(**sizes, **kw))}[family]
  ids = jnp.arange(32, dtype=jnp.int32).reshape(2, 16) + 5
  mask = jnp.ones((2, 16), jnp.int32).at[1, 10:].set(0)
  params = jax.jit(make().init)(jax.random.key(0), ids, mask)["params"]
  explicit = make().apply({"params": params}, ids, mask)["last_hidden_state"]
  calls = []
  fused_kernel = jax.nn.dot_product_attention
  with mock.patch.object(jax.nn, "dot_product_attention",
                         lambda *a, **k: calls.append(1) or fused_kernel(*a, **k)):
    fused = make(attention_implementation="cudnn").apply({"params": params}, ids,
                                                         mask)["last_hidden_state"]
  assert calls, "the fused kernel never ran"
  np.testing.assert_allclose(fused, explicit, atol=2e-5)


def test_attention_the_fused_kernel_cannot_run_refuses_it():
  with pytest.raises(ValueError, match="DeBERTa's disentangled attention.*use 'xla'"):
    deberta.DebertaConfig(attention_implementation="cudnn")
  sizes = dict(vocab_size=60, hidden_size=16, num_layers=1, num_heads=2, intermediate_size=32,
               max_position_embeddings=64, attention=sparse.Longformer(window=4, global_tokens=()))
  model = longformer.LongformerModel(longformer.LongformerConfig(
      **sizes, attention_implementation="cudnn"))
  with pytest.raises(ValueError, match="runs dense attention only; this stack's attention is "
                     r"\w+\. Use 'xla'"):
    model.init(jax.random.key(0), jnp.ones((1, 16), jnp.int32))
