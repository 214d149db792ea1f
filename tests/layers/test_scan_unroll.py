"""`scan_unroll` changes how a layer loop compiles, never what it computes: the same
parameters give the same outputs and gradients, dropout included, whether the scan runs
one layer per iteration or several. Every family's loop takes it (GPT's decoder is the
same TransformerStack as BERT's; T5, BART, XLNet and DeBERTa have their own), and by
default it unrolls on a GPU only."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bertjax.layers import transformer
from bertjax.models import albert, bart, bert, deberta, t5, xlnet

SIZES = dict(vocab_size=40, hidden_size=16, num_heads=2, intermediate_size=24,
             num_layers=3, max_position_embeddings=16)
IDS = jax.random.randint(jax.random.PRNGKey(0), (2, 10), 1, 40)
# Each family: (its model for some config changes, its inputs, its loops' depths).
MODELS = {
    "bert": (lambda **kw: bert.BertForMaskedLM(bert.BertConfig(**SIZES, **kw)), (IDS,), [3]),
    "albert (shared layers)": (lambda **kw: albert.AlbertForMaskedLM(
        albert.AlbertConfig(**SIZES, embedding_size=8, **kw)), (IDS,), [3]),
    "deberta": (lambda **kw: deberta.DebertaForMaskedLM(deberta.DebertaConfig(
        **SIZES, relative_attention=True, position_buckets=8, position_biased_input=False,
        **kw)), (IDS,), [3]),
    "xlnet": (lambda **kw: xlnet.XLNetLMHeadModel(xlnet.XLNetConfig(
        vocab_size=40, hidden_size=16, num_layers=3, num_heads=2, intermediate_size=24,
        **kw)), (IDS,), [3]),
    "t5": (lambda **kw: t5.T5ForConditionalGeneration(t5.T5Config(
        vocab_size=40, hidden_size=16, head_dim=8, intermediate_size=24, num_layers=3,
        num_decoder_layers=2, num_heads=2, **kw)), (IDS, IDS[:, :6]), [3, 2]),
    "bart": (lambda **kw: bart.BartForConditionalGeneration(bart.BartConfig(
        vocab_size=40, hidden_size=16, encoder_layers=3, decoder_layers=2, encoder_heads=2,
        decoder_heads=2, encoder_ffn_size=24, decoder_ffn_size=24,
        max_position_embeddings=16, **kw)), (IDS, IDS[:, :6]), [3, 2]),
}


@pytest.mark.parametrize("name", sorted(MODELS))
def test_unrolled_layers_compute_the_same(name):
  make, inputs, _ = MODELS[name]
  scanned = make(scan_unroll=1)
  params = jax.jit(lambda k: scanned.init(k, *inputs)["params"])(jax.random.PRNGKey(1))

  def loss(module, p):  # train mode: dropout on, the same key
    out = module.apply({"params": p}, *inputs, deterministic=False,
                       rngs={"dropout": jax.random.PRNGKey(2)})
    return jnp.square(out["logits"]).mean(), out["logits"]

  (reference, logits), grads = jax.value_and_grad(lambda p: loss(scanned, p), has_aux=True)(params)
  # Two layers per iteration of three: one unrolled pair, then the remainder alone.
  unrolled = make(scan_unroll=2)
  (value, other), other_grads = jax.value_and_grad(lambda p: loss(unrolled, p),
                                                   has_aux=True)(params)
  np.testing.assert_allclose(other, logits, atol=1e-5)
  np.testing.assert_allclose(value, reference, rtol=1e-5)
  jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, atol=1e-6), other_grads, grads)


def _scan_unrolls(model, inputs) -> list:
  """The `unroll` of every scan in the model's forward pass, in order."""
  params = jax.eval_shape(lambda k: model.init(k, *inputs)["params"], jax.random.PRNGKey(0))
  jaxpr = jax.make_jaxpr(lambda p: model.apply({"params": p}, *inputs))(params)
  found = []

  def walk(jaxpr):
    for eqn in jaxpr.eqns:
      if eqn.primitive.name == "scan":
        found.append(eqn.params["unroll"])
      for sub in jax.core.jaxprs_in_params(eqn.params):
        walk(sub)
  walk(jaxpr.jaxpr)
  return found


@pytest.mark.parametrize("name", sorted(MODELS))
def test_by_default_the_layer_loop_is_unrolled_on_a_gpu_only(name, monkeypatch):
  make, inputs, depths = MODELS[name]
  assert _scan_unrolls(make(), inputs) == [1] * len(depths)  # this process runs on a CPU
  monkeypatch.setattr(jax, "default_backend", lambda: "gpu")
  assert _scan_unrolls(make(), inputs) == depths  # every loop unrolled whole
  # An explicit choice is kept on any backend.
  assert _scan_unrolls(make(scan_unroll=1), inputs) == [1] * len(depths)


def test_layers_per_iteration():
  assert transformer.layers_per_iteration(0, 12) == 1  # this process runs on a CPU
  assert transformer.layers_per_iteration(2, 12) == 2
  assert transformer.layers_per_iteration(20, 12) == 12  # capped at the stack's depth
  with pytest.raises(ValueError, match=r"scan_unroll=-1: give the layers per loop iteration"):
    transformer.layers_per_iteration(-1, 12)
