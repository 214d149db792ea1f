"""BigBird and Longformer attention: the reference's random plan, dense equivalence when
the pattern covers everything, a naive masked reference for windows / dilation / globals /
packing, and no [L, L] intermediate anywhere."""
import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import transformers

from bertjax.layers import attention
from bertjax.layers.long_attention import bigbird_plan, sparse
from bertjax.layers.long_attention import token_mask as tm

HEADS, DIM = 2, 4
FEATURES = HEADS * DIM


def _params_and_inputs(module, length: int, batch: int = 2, seed: int = 0):
  x = jax.random.normal(jax.random.PRNGKey(seed), (batch, length, FEATURES))
  return nn.unbox(jax.jit(module.init)(jax.random.PRNGKey(seed + 1), x)), x


def _dense(params, x, mask):
  dense = attention.MultiHeadAttention(HEADS, DIM)
  params = {k: params["params"][k] for k in ("query", "key", "value", "out")}
  return jax.jit(dense.apply)({"params": params}, x, mask=mask)


@pytest.mark.parametrize("length,seed", [(80, 3), (136, 1), (256, 0), (1024, 2)])
def test_plan_is_transformers_training_plan(length, seed):
  config = transformers.BigBirdConfig(num_attention_heads=3, block_size=8, num_random_blocks=2,
                                      max_position_embeddings=2048, hidden_size=24)
  ref = transformers.models.big_bird.modeling_big_bird.BigBirdBlockSparseAttention(config).train()
  np.random.seed(seed)
  if length in bigbird_plan.PAPER_PLAN_LENGTHS:
    expected = [ref._bigbird_block_rand_mask(2048, 2048, 8, 8, 2, last_idx=1024)[:length // 8 - 2]
                for _ in range(3)]
  else:
    lengths, counts = ref._get_rand_attn_plan(length, 8, 2)
    expected = ref._bigbird_block_rand_mask_with_head(length, length, 8, 8, 3, lengths, counts)
  got = bigbird_plan.draw_plan(length, 8, 2, 3, np.random.RandomState(seed), 2048)
  np.testing.assert_array_equal(got, np.stack(expected))


def test_layer_plans_differ_per_layer_and_repeat():
  plans = bigbird_plan.layer_plans(128, 8, 3, 2, 3, 7, 4096)
  again = bigbird_plan.layer_plans.__wrapped__(128, 8, 3, 2, 3, 7, 4096)
  np.testing.assert_array_equal(plans, again)
  assert plans.shape == (3, 2, 14, 3) and not np.array_equal(plans[0], plans[1])


@pytest.mark.parametrize("length", [12, 16])  # 3 and 4 blocks of 4: window + globals = all
def test_bigbird_covering_everything_equals_dense(length):
  spec = sparse.BigBird(block_size=4, num_random_blocks=0, dense_fallback=False)
  module = sparse.BigBirdAttention(spec, HEADS, DIM)
  params, x = _params_and_inputs(module, length)
  valid = np.ones((2, length), bool)
  valid[1, length - 5:] = False
  segments = np.where(valid, 1 + (np.arange(length) >= 5), 0)
  run = jax.jit(lambda mask: module.apply(params, x, mask=mask))
  for mask, dense_mask in (
      (tm.TokenMask(jnp.asarray(valid)), attention.key_padding_mask(jnp.asarray(valid))),
      (tm.from_features(jnp.asarray(valid), jnp.asarray(segments)),
       attention.encoder_mask(jnp.asarray(valid), jnp.asarray(segments)))):
    got = run(mask)
    want = _dense(params, x, dense_mask)
    np.testing.assert_allclose(np.asarray(got)[valid], np.asarray(want)[valid], atol=1e-5)


def _naive_longformer(q, k, v, window, dilation, valid, glob, gq, gk, gv):
  """Per-head masked dense attention: the pattern spelled out as an [L, L] mask."""
  n = q.shape[1]
  i, j = np.arange(n)[:, None], np.arange(n)[None, :]
  outs = []
  for h, d in enumerate(dilation):
    local = (np.abs(i - j) <= window * d) & ((i - j) % d == 0) & ~glob[:, None, :]
    allowed = (local | glob[:, None, :]) & valid[:, None, :]
    probs = attention.attention_probs(q[:, :, h:h + 1], k[:, :, h:h + 1], allowed[:, None],
                                      scale_logits=False)
    outs.append(jnp.einsum("bhqk,bkhd->bqhd", probs, v[:, :, h:h + 1]))
  out = jnp.concatenate(outs, 2)
  g_probs = attention.attention_probs(gq, gk, valid[:, None, None, :], scale_logits=False)
  g_out = jnp.einsum("bhqk,bkhd->bqhd", g_probs, gv)
  return jnp.where(glob[:, :, None, None], g_out, out)


@pytest.mark.parametrize("window,dilation", [(3, (1, 1)), (2, (1, 3)), (4, (2, 1))])
def test_longformer_matches_naive_masked_attention(window, dilation):
  length = 21
  spec = sparse.Longformer(window=window, dilation=dilation, max_global_tokens=4)
  module = sparse.LongformerAttention(spec, HEADS, DIM)
  params, x = _params_and_inputs(module, length)
  valid = np.ones((2, length), bool)
  valid[0, 17:] = False
  glob = np.zeros((2, length), bool)
  glob[:, 0] = True
  glob[1, [6, 13]] = True
  mask = tm.from_features(jnp.asarray(valid), None, jnp.asarray(glob))
  got = jax.jit(lambda: module.apply(params, x, mask=mask))()

  p = params["params"]
  proj = lambda name: jnp.einsum("ble,ehd->blhd", x, p[name]["kernel"]) + p[name]["bias"]
  scale = np.sqrt(DIM)
  context = _naive_longformer(proj("query") / scale, proj("key"), proj("value"), window,
                              dilation, valid, glob, proj("query_global") / scale,
                              proj("key_global"), proj("value_global"))
  want = jnp.einsum("blhd,hde->ble", context, p["out"]["kernel"]) + p["out"]["bias"]
  np.testing.assert_allclose(np.asarray(got)[valid], np.asarray(want)[valid], atol=1e-5)


def test_longformer_covering_everything_equals_dense():
  """Window >= length, [CLS] global with its projections tied to the local ones."""
  length = 13
  module = sparse.LongformerAttention(sparse.Longformer(window=16), HEADS, DIM)
  params, x = _params_and_inputs(module, length)
  p = dict(params["params"])
  for name in ("query", "key", "value"):
    p[f"{name}_global"] = p[name]
  valid = np.ones((2, length), bool)
  valid[1, 9:] = False
  mask = tm.TokenMask(jnp.asarray(valid))
  got = jax.jit(lambda: module.apply({"params": p}, x, mask=mask))()
  want = _dense(params, x, attention.key_padding_mask(jnp.asarray(valid)))
  np.testing.assert_allclose(np.asarray(got)[valid], np.asarray(want)[valid], atol=1e-5)


def test_longformer_packed_rows_equal_separate_rows():
  module = sparse.LongformerAttention(sparse.Longformer(window=3, global_tokens=(0,)), HEADS, DIM)
  params, x = _params_and_inputs(module, 16, batch=1)
  segments = jnp.asarray([[1] * 9 + [2] * 7])
  glob = jnp.asarray([[True] + [False] * 8 + [True] + [False] * 6])
  run = jax.jit(lambda x, mask: module.apply(params, x, mask=mask))
  packed = run(x, tm.from_features(None, segments, glob))
  first, second = run(x[:, :9], None), run(x[:, 9:], None)
  np.testing.assert_allclose(packed[:, :9], first, atol=1e-5)
  np.testing.assert_allclose(packed[:, 9:], second, atol=1e-5)


def test_longformer_too_many_globals_poisons_the_row():
  module = sparse.LongformerAttention(sparse.Longformer(window=2, max_global_tokens=2), HEADS, DIM)
  params, x = _params_and_inputs(module, 8)
  glob = jnp.asarray([[1, 1, 0, 0, 0, 0, 0, 0], [1, 1, 1, 0, 0, 0, 0, 0]], bool)
  out = jax.jit(lambda: module.apply(params, x, mask=tm.from_features(None, None, glob)))()
  assert np.isfinite(out[0]).all() and np.isnan(out[1]).all()


def _largest_intermediate(fn, *args) -> int:
  jaxpr = jax.make_jaxpr(fn)(*args)
  sizes = []
  def visit(jp):
    for eqn in jp.eqns:
      sizes.extend(int(np.prod(v.aval.shape)) for v in eqn.outvars if hasattr(v.aval, "shape"))
      for value in eqn.params.values():  # nested jaxprs (pjit, custom_jvp...)
        for sub in value if isinstance(value, (tuple, list)) else (value,):
          if hasattr(sub, "eqns"):
            visit(sub)
          elif hasattr(sub, "jaxpr") and hasattr(sub.jaxpr, "eqns"):
            visit(sub.jaxpr)
  visit(jaxpr.jaxpr)
  return max(sizes)


@pytest.mark.parametrize("spec", [sparse.BigBird(block_size=16, num_random_blocks=2),
                                  sparse.Longformer(window=16, dilation=(1, 2))],
                         ids=["bigbird", "longformer"])
def test_no_quadratic_intermediate(spec):
  length = 2048
  module = spec.make(num_heads=HEADS, head_dim=DIM, dropout_rate=0.0, use_bias=True,
                     init_std=0.02, dtype=jnp.float32, num_layers=1, name=None)
  x = jnp.zeros((1, length, FEATURES))
  params = jax.eval_shape(lambda: nn.unbox(module.init(jax.random.PRNGKey(0), x)))
  biggest = _largest_intermediate(lambda p, x: module.apply(p, x), params, x)
  assert biggest < length * length / 8, biggest
