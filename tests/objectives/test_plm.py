"""XLNet's permutation-LM objective: the loss, memory carried through the train step
(also across microbatches), and a tiny XLNet whose PLM loss falls under its gin config."""
import flax.linen as nn
import gin
import jax
import jax.numpy as jnp
import numpy as np
import optax

from bertjax.train import state as train_state, step as train_step
from bertjax.models import xlnet
from bertjax.objectives import plm

VOCAB = 40


class SyntheticPlm:
  """Seeded PLM batches shaped like the data layer's XLNet features.

  Tokens follow a steep Zipf law (learnable within tens of steps). Each row gets a
  random factorization order over P targets; every other token is context that sees
  all context and no target (XLNet's partial prediction).
  """

  def __init__(self, task_name, split, batch_size, sequence_length, seed, shard_id=0,
               num_shards=1, num_predict=4):
    del task_name, shard_id, num_shards
    self.b, self.l, self.p = batch_size, sequence_length, num_predict
    self.seed = seed + (0 if split == "train" else 999)

  def __iter__(self):
    rng = np.random.default_rng(self.seed)
    while True:
      yield self.batch(rng)

  def batch(self, rng):
    b, l, p = self.b, self.l, self.p
    probs = 1.0 / np.arange(1, VOCAB - 4) ** 1.5
    ids = (rng.choice(VOCAB - 5, size=(b, l), p=probs / probs.sum()) + 5).astype(np.int32)
    perm_mask = np.zeros((b, l, l), np.float32)
    target_mapping = np.zeros((b, p, l), np.float32)
    for row in range(b):
      targets = np.sort(rng.choice(l, p, replace=False))
      rank = np.zeros(l, np.int32)
      rank[targets] = 1 + rng.permutation(p)  # context 0, targets 1..P in the order
      is_target = rank > 0
      perm_mask[row] = is_target[None, :] & (rank[None, :] >= rank[:, None])
      target_mapping[row, np.arange(p), targets] = 1.0
    return {"input_ids": ids, "attention_mask": np.ones((b, l), np.int32),
            "token_type_ids": np.zeros((b, l), np.int32), "perm_mask": perm_mask,
            "target_mapping": target_mapping,
            "target_ids": np.einsum("bpl,bl->bp", target_mapping, ids).astype(np.int32),
            "target_weights": np.ones((b, p), np.float32)}


gin.external_configurable(SyntheticPlm, "SyntheticPlm")


def test_loss_is_mean_cross_entropy_over_real_targets():
  rng = np.random.default_rng(0)
  logits = jnp.asarray(rng.normal(size=(2, 3, 7)), jnp.float32)
  targets = jnp.asarray([[1, 2, 0], [3, 0, 0]])
  weights = jnp.asarray([[1.0, 1.0, 0.0], [1.0, 0.0, 0.0]])
  loss, metrics = plm.PermutationLM()({"logits": logits},
                                      {"target_ids": targets, "target_weights": weights})
  log_probs = jax.nn.log_softmax(logits)
  want = -(log_probs[0, 0, 1] + log_probs[0, 1, 2] + log_probs[1, 0, 3]) / 3
  np.testing.assert_allclose(loss, want, rtol=1e-6)
  assert float(metrics["plm_loss"][1]) == 3.0


def _setup(cfg, batch_size=4, length=12, num_microbatches=1):
  model = xlnet.XLNetLMHeadModel(cfg)
  objective = plm.PermutationLM()
  batch = SyntheticPlm(None, "train", batch_size, length, 0).batch(np.random.default_rng(0))
  init = train_state.init_params_fn(model, batch, objective.model_inputs)
  params = jax.jit(lambda k: nn.unbox(init(k)))(jax.random.PRNGKey(0))
  tx = optax.sgd(0.0)
  state = train_state.TrainState(step=jnp.zeros((), jnp.int32), params=params,
                                 opt_state=tx.init(params),
                                 rng=jax.random.key_data(jax.random.PRNGKey(1)))
  step = jax.jit(train_step.make_train_step(model, objective, tx, lambda s: 0.0,
                                            num_microbatches))
  return model, objective, batch, state, step


def test_train_step_carries_memory_and_microbatches_keep_rows():
  cfg = xlnet.xlnet_tiny(vocab_size=VOCAB, hidden_dropout=0.0, mem_len=6, reuse_len=5)
  model, objective, batch, state, step = _setup(cfg)
  assert train_step.carries_state(objective)
  carry = objective.initial_carry(model, 4)
  assert carry["mems"].shape == (4, cfg.num_layers, 6, cfg.hidden_size)
  _, m1, carry1 = step(state, batch, carry)
  _, m2, carry2 = step(state, batch, carry1)
  assert carry2["mems"].shape == carry["mems"].shape
  # Memory changes what the model predicts: same batch, different memory, other loss.
  assert abs(float(m1["loss"][0]) - float(m2["loss"][0])) > 1e-6
  # Memory = the last mem_len of [old memory; the segment's first reuse_len states]:
  # step 2 keeps the newest entry of step 1's memory as its oldest.
  np.testing.assert_allclose(carry2["mems"][:, :, :1], carry1["mems"][:, :, 5:], atol=1e-6)
  # Same carry when the batch is split into microbatches (rows return to their place).
  _, _, _, _, step2 = _setup(cfg, num_microbatches=2)
  _, m_micro, carry_micro = step2(state, batch, carry1)
  np.testing.assert_allclose(carry_micro["mems"], carry2["mems"], atol=1e-5)
  np.testing.assert_allclose(m_micro["plm_loss"][0], m2["plm_loss"][0], rtol=1e-5)


def test_tiny_xlnet_trains_under_its_gin_config(tmp_path):
  from bertjax import main
  from bertjax.train import metrics as metrics_writer, trainer
  gin.clear_config()
  main.parse_gin(["models/xlnet_tiny.gin", "objectives/xlnet_plm.gin", "runs/pretrain.gin"], [
      f"build_model.config_overrides = {{'vocab_size': {VOCAB}, 'mem_len': 8, 'reuse_len': 6}}",
      "Trainer.data_fn = @SyntheticPlm",
      "Trainer.train_task = 'synthetic'",
      "Trainer.num_train_steps = 40",
      "Trainer.batch_size = 8",
      "Trainer.sequence_length = 16",
      "Trainer.log_every = 10",
      "Trainer.checkpoint_every = 40",
      "Trainer.best_metric = None",
      "Trainer.show_progress = False",
      "Trainer.async_checkpoints = False",
      "warmup_linear_decay.peak_value = 3e-3",
      "warmup_linear_decay.warmup_steps = 5",
  ])
  try:
    summary = trainer.Trainer(model_dir=str(tmp_path)).run("train")
  finally:
    gin.clear_config()
  assert summary["step"] == 40
  rows = [r for r in metrics_writer.read_metrics(str(tmp_path)) if r["split"] == "train"]
  losses = [r["plm_loss"] for r in rows]
  assert losses[-1] < losses[0] - 0.3, losses
  assert all(np.isfinite(losses))
