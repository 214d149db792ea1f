"""Linformer: equals dense attention when k = n and E = F = I; the paper's sharing
options own the parameters they should; a tiny Linformer BERT trains on CPU."""
import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import traverse_util

from bertjax.layers import attention
from bertjax.layers.long_attention import kinds as attention_types, linformer as lowrank
from bertjax.layers.long_attention import token_mask as tm
from bertjax.models import bert

HEADS, DIM, LENGTH = 2, 4, 10


@pytest.mark.parametrize("sharing", ["none", "headwise", "key_value"])
def test_identity_projection_equals_dense(sharing):
  spec = lowrank.Linformer(projected_length=LENGTH, max_length=LENGTH, sharing=sharing)
  module = lowrank.LinformerAttention(spec, HEADS, DIM)
  x = jax.random.normal(jax.random.PRNGKey(0), (2, LENGTH, HEADS * DIM))
  params = dict(nn.unbox(jax.jit(module.init)(jax.random.PRNGKey(1), x))["params"])
  for name in ("key_projection", "value_projection"):
    if name in params:
      params[name] = jnp.broadcast_to(jnp.eye(LENGTH), params[name].shape)
  got = jax.jit(module.apply)({"params": params}, x)
  dense = {k: params[k] for k in ("query", "key", "value", "out")}
  want = attention.MultiHeadAttention(HEADS, DIM).apply({"params": dense}, x)
  np.testing.assert_allclose(got, want, atol=1e-5)


def _encoder_params(sharing: str, num_layers: int = 3):
  spec = lowrank.Linformer(projected_length=4, max_length=16, sharing=sharing)
  cfg = bert.BertConfig(vocab_size=50, hidden_size=8, num_layers=num_layers, num_heads=HEADS,
                        intermediate_size=16, max_position_embeddings=16, attention=spec)
  params = jax.eval_shape(lambda: bert.init_params(bert.BertModel(cfg), jax.random.PRNGKey(0),
                                                   length=16))
  return {k: v.shape for k, v in traverse_util.flatten_dict(params, sep="/").items()
          if "projection" in k}


def test_sharing_options_own_the_right_parameters():
  layers = "encoder/layers/attention/"
  assert _encoder_params("none") == {f"{layers}key_projection": (3, HEADS, 16, 4),
                                     f"{layers}value_projection": (3, HEADS, 16, 4)}
  assert _encoder_params("headwise") == {f"{layers}key_projection": (3, 16, 4),
                                         f"{layers}value_projection": (3, 16, 4)}
  assert _encoder_params("key_value") == {f"{layers}key_projection": (3, 16, 4)}
  assert _encoder_params("layerwise") == {"encoder/linformer_projection": (16, 4)}


def test_padding_keys_do_not_matter_and_packed_rows_are_refused():
  spec = lowrank.Linformer(projected_length=4, max_length=LENGTH)
  module = lowrank.LinformerAttention(spec, HEADS, DIM)
  x = jax.random.normal(jax.random.PRNGKey(0), (1, LENGTH, HEADS * DIM))
  params = jax.jit(module.init)(jax.random.PRNGKey(1), x)
  valid = jnp.asarray([[True] * 6 + [False] * 4])
  noisy = x.at[:, 6:].set(100.0)
  run = jax.jit(lambda x, mask: module.apply(params, x, mask=mask))
  a = run(x, tm.TokenMask(valid))
  b = run(noisy, tm.TokenMask(valid))
  np.testing.assert_allclose(a[:, :6], b[:, :6], atol=1e-5)
  packed = tm.from_features(valid, jnp.asarray([[1] * 5 + [2] * 5]))
  assert np.isnan(run(x, packed)).all()


def test_gin_factory_builds_each_type():
  assert attention_types.attention() is None
  assert attention_types.attention("linformer", projected_length=8).projected_length == 8
  assert attention_types.attention("longformer", window=[2, 4]).window == (2, 4)
  with pytest.raises(ValueError, match="expected 'dense' or one of"):
    attention_types.attention("performer")
  with pytest.raises(ValueError, match="attention\\('bigbird'\\)"):
    attention_types.attention("bigbird", window=3)


def test_linformer_bert_learns_on_cpu():
  """A 2-layer Linformer BERT learns to predict, at every position, the row's first token
  (only attention can carry it there): the loss falls well below chance."""
  length, vocab = 16, 16
  spec = lowrank.Linformer(projected_length=4, max_length=length, sharing="layerwise")
  cfg = bert.BertConfig(vocab_size=vocab, hidden_size=32, num_layers=2, num_heads=2,
                        intermediate_size=64, max_position_embeddings=length, hidden_dropout=0.0,
                        attention_dropout=0.0, attention=spec)
  model = bert.BertForMaskedLM(cfg)
  params = bert.init_params(model, jax.random.PRNGKey(0), length=length)
  tx = optax.adam(5e-3)
  opt_state = tx.init(params)
  ids = jax.random.randint(jax.random.PRNGKey(1), (256, length), 1, vocab)
  targets = jnp.broadcast_to(ids[:, :1], ids.shape)

  @jax.jit
  def step(params, opt_state, batch_ids, batch_targets):
    def loss_fn(p):
      logits = model.apply({"params": p}, batch_ids)["logits"]
      return optax.softmax_cross_entropy_with_integer_labels(logits, batch_targets).mean()
    loss, grads = jax.value_and_grad(loss_fn)(params)
    updates, opt_state = tx.update(grads, opt_state, params)
    return optax.apply_updates(params, updates), opt_state, loss

  losses = []
  for i in range(150):
    rows = slice(16 * (i % 16), 16 * (i % 16 + 1))
    params, opt_state, loss = step(params, opt_state, ids[rows], targets[rows])
    losses.append(float(loss))
  assert np.mean(losses[-10:]) < 0.6 * np.log(vocab), (losses[:5], losses[-5:])


@pytest.mark.slow
def test_linformer_recipe_trains_from_gin(tmp_path):
  """gin/models/linformer_base.gin (attention chosen by name, unpacked batches), shrunk,
  under the MLM recipe on the embedded corpus: the loss falls."""
  from tests.helpers import pretraining as pretraining_helpers
  records = pretraining_helpers.train(
      tmp_path, ["runs/pretrain.gin", "models/linformer_base.gin", "objectives/roberta_mlm.gin"],
      [f"build_model.config_overrides = {{{pretraining_helpers.TINY}, 'attention': @attention()}}",
       "attention.max_length = 32", "attention.projected_length = 8"])
  assert "attention.attention_type = 'linformer'" in (tmp_path / "operative_config.gin").read_text()
  loss = pretraining_helpers.early_late(records, "loss")
  assert loss[1] < loss[0] - 0.2, loss
