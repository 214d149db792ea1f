"""`scan_unroll` changes how the layer loop compiles, never what it computes: the same
parameters give the same outputs and gradients, dropout included, whether the scan runs
one layer per iteration or several (GPT's decoder is the same TransformerStack as BERT's),
and by default it unrolls on a GPU only."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bertjax.layers import transformer
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


def _scan_unrolls(model, ids) -> list:
  """The `unroll` of every scan in the model's forward pass."""
  params = jax.eval_shape(lambda k: model.init(k, ids)["params"], jax.random.PRNGKey(0))
  jaxpr = jax.make_jaxpr(lambda p: model.apply({"params": p}, ids))(params)
  return [e.params["unroll"] for e in jaxpr.jaxpr.eqns if e.primitive.name == "scan"]


def test_by_default_the_layer_loop_is_unrolled_on_a_gpu_only(monkeypatch):
  ids = jnp.ones((2, 10), jnp.int32)
  assert transformer.layers_per_iteration(0, 12) == 1  # this process runs on a CPU
  assert _scan_unrolls(MODELS["bert"](), ids) == [1]
  monkeypatch.setattr(jax, "default_backend", lambda: "gpu")
  assert transformer.layers_per_iteration(0, 12) == 12
  assert _scan_unrolls(MODELS["bert"](), ids) == [3]  # all of SIZES' three layers
  # An explicit choice is kept on any backend (capped at the stack's depth).
  assert transformer.layers_per_iteration(2, 12) == 2
  assert transformer.layers_per_iteration(20, 12) == 12
  assert _scan_unrolls(MODELS["bert"](scan_unroll=1), ids) == [1]
  with pytest.raises(ValueError, match=r"scan_unroll=-1: give the layers per loop iteration"):
    transformer.layers_per_iteration(-1, 12)
