"""`scan_unroll` changes how the layer loop compiles, never what it computes: the same
parameters give the same outputs and gradients, dropout included, whether the scan runs
one layer per iteration or several. (GPT's decoder is the same TransformerStack as BERT's.)"""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bertjax.models import albert, bert

SIZES = dict(vocab_size=40, hidden_size=16, num_heads=2, intermediate_size=24,
             num_layers=3, max_position_embeddings=16)
MODELS = {
    "bert": lambda **kw: bert.BertForMaskedLM(bert.BertConfig(**SIZES, **kw)),
    "albert (shared layers)": lambda **kw: albert.AlbertForMaskedLM(
        albert.AlbertConfig(**SIZES, embedding_size=8, **kw)),
}


@pytest.mark.parametrize("name", sorted(MODELS))
def test_unrolled_layers_compute_the_same(name):
  ids = jax.random.randint(jax.random.PRNGKey(0), (2, 10), 1, 40)
  scanned = MODELS[name]()
  params = jax.jit(lambda k: scanned.init(k, ids)["params"])(jax.random.PRNGKey(1))

  def loss(module, p):  # train mode: dropout on, the same key
    out = module.apply({"params": p}, ids, deterministic=False,
                       rngs={"dropout": jax.random.PRNGKey(2)})
    return jnp.square(out["logits"]).mean(), out["logits"]

  (reference, logits), grads = jax.value_and_grad(lambda p: loss(scanned, p), has_aux=True)(params)
  # Two layers per iteration of three: one unrolled pair, then the remainder alone.
  unrolled = MODELS[name](scan_unroll=2)
  (value, other), other_grads = jax.value_and_grad(lambda p: loss(unrolled, p),
                                                   has_aux=True)(params)
  np.testing.assert_allclose(other, logits, atol=1e-5)
  np.testing.assert_allclose(value, reference, rtol=1e-5)
  jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, atol=1e-6), other_grads, grads)
