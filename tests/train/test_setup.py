"""train.setup: the one place a run's mesh, train state layout and sharded step come from."""
import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import PartitionSpec as P

from bertjax.models import bert
from bertjax.train import optimizers, partitioning, setup as train_setup

CONFIG = bert.BertConfig(vocab_size=32, hidden_size=16, num_layers=1, num_heads=2,
                         intermediate_size=32, max_position_embeddings=16, hidden_dropout=0.0,
                         attention_dropout=0.0)


class _MeanSquare:
  """A toy objective: the mean square of the last hidden state."""
  rng_names = ()

  def model_inputs(self, batch):
    return {"input_ids": batch["input_ids"]}

  def __call__(self, outputs, batch):
    loss = jnp.mean(outputs["last_hidden_state"] ** 2)
    return loss, {}


def test_build_lays_the_state_out_and_steps_it_in_place():
  model, objective = bert.BertModel(CONFIG, add_pooling_layer=False), _MeanSquare()
  batch = {"input_ids": np.arange(64, dtype=np.int32).reshape(8, 8) % 32}
  run = train_setup.build(model, batch, objective.model_inputs,
                          optimizers.make_optimizer(10), partitioning.make_mesh((4, 2)),
                          partitioning.DEFAULT_RULES)
  assert run.example["input_ids"].shape == (1, 8)
  assert run.batch_sharding.spec == P("data")
  state = run.new_state(seed=0)
  assert jax.tree.map(lambda a: a.sharding, state) == run.state_shardings
  kernel = state.params["encoder"]["layers"]["mlp"]["intermediate"]["kernel"]
  assert kernel.sharding.spec == P(None, None, "model")
  target = run.restore_target()
  assert target.params["encoder"]["layers"]["mlp"]["intermediate"]["kernel"].sharding == \
      kernel.sharding
  state, metrics = run.jit_train_step(model, objective)(state, batch)
  assert int(state.step) == 1 and np.isfinite(float(metrics["loss"][0]))
  assert jax.tree.map(lambda a: a.sharding, state) == run.state_shardings


def test_data_parallel_mesh_takes_the_devices_that_split_every_batch():
  assert train_setup.data_parallel_mesh(16 // 2).shape == {"data": 8, "model": 1}
  assert train_setup.data_parallel_mesh(4).devices.size == 4
  assert train_setup.data_parallel_mesh(6, 64).devices.size == 2
