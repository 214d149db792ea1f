"""A 4 (data) x 2 (model) mesh of CPU devices gives the single-device result, really sharded."""
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from jax.sharding import PartitionSpec as P

from bertjax.models import bert
from bertjax.train import partitioning
from bertjax.train import state as train_state

CONFIG = bert.BertConfig(vocab_size=96, hidden_size=64, num_layers=2, num_heads=4,
                         intermediate_size=80, max_position_embeddings=32)


def test_eight_fake_devices_are_visible():
  assert jax.device_count() == 8, "tests/conftest.py sets --xla_force_host_platform_device_count=8"


def test_sharded_forward_equals_single_device_and_splits_kernels():
  module = bert.BertForPreTraining(CONFIG)
  mesh = partitioning.make_mesh((4, 2), ("data", "model"))
  rules = partitioning.axis_rules()
  # Initialised as the trainer does: straight into the sharded layout.
  init = train_state.init_params_fn(module, {"input_ids": jnp.zeros((1, 8), jnp.int32)},
                                    lambda batch: batch)
  tx = optax.adamw(1e-3)
  _, state_shardings = train_state.state_shardings(jax.eval_shape(init, jax.random.key(0)), tx,
                                                   mesh, rules)
  state = train_state.create_state(init, tx, 0, state_shardings)
  params, shardings = state.params, state_shardings.params
  # Adam's moments are laid out like the parameters they track.
  mu = state.opt_state[0].mu["bert"]["encoder"]["layers"]["attention"]["query"]["kernel"]
  assert mu.sharding.spec == P(None, None, "model", None)

  layers = params["bert"]["encoder"]["layers"]
  assert layers["attention"]["query"]["kernel"].sharding.spec == P(None, None, "model", None)
  assert layers["attention"]["out"]["kernel"].sharding.spec == P(None, "model", None, None)
  assert layers["mlp"]["intermediate"]["kernel"].sharding.spec == P(None, None, "model")
  assert layers["mlp"]["output"]["kernel"].sharding.spec == P(None, "model", None)
  vocab = params["bert"]["embeddings"]["word_embeddings"]["embedding"]
  assert vocab.sharding.spec == P("model", None)
  # Each device really holds half of the heads.
  assert {s.data.shape for s in layers["attention"]["query"]["kernel"].addressable_shards} == {(2, 64, 2, 16)}

  rng = np.random.default_rng(0)
  ids = jnp.asarray(rng.integers(1, 96, (8, 16)), jnp.int32)
  mask = jnp.asarray(np.arange(16)[None] < rng.integers(4, 17, (8, 1)), jnp.int32)
  forward = lambda p, i, m: module.apply({"params": p}, i, attention_mask=m)
  data = partitioning.batch_sharding(mesh, rules)
  sharded = partitioning.jit_sharded(forward, mesh, rules, (shardings, data, data), None)(params, ids, mask)
  assert sharded["prediction_logits"].sharding.spec == P("data", None, "model")

  single = jax.jit(forward)(jax.device_put(jax.device_get(params), jax.devices()[0]), ids, mask)
  for key in ("prediction_logits", "seq_relationship_logits", "last_hidden_state"):
    np.testing.assert_allclose(np.asarray(sharded[key]), np.asarray(single[key]), atol=1e-5, rtol=0)


def test_fsdp_rules_shard_embed_over_data():
  module = bert.BertModel(CONFIG)
  mesh = partitioning.make_mesh((4, 2))
  abstract = jax.eval_shape(lambda: module.init(jax.random.PRNGKey(0), jnp.zeros((1, 8), jnp.int32))["params"])
  shardings = partitioning.shardings_for(abstract, mesh, partitioning.FSDP_RULES)
  assert shardings["encoder"]["layers"]["attention"]["query"]["kernel"].spec == P(None, "data", "model", None)


@pytest.mark.parametrize("shape, message", [((3, 2), "needs 6 devices"), ((-1, -1), "more than one -1"),
                                            ((-1, 3), "do not divide")])
def test_bad_mesh_shapes_are_explained(shape, message):
  with pytest.raises(ValueError, match=message):
    partitioning.make_mesh(shape)
