"""XLNet's segment recurrence end to end: the memory the train step carries over the
xlnet_plm row streams equals attending to the concatenated text, and it survives a
SIGKILL + restart (checkpointed with the rest of the state)."""
import os
import random
import signal

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from bertjax import checkpoints
from bertjax.train import state as train_state, step as train_step
from bertjax.data import recipes
from bertjax.models import xlnet
from bertjax.objectives import plm
from tests.helpers import trainer as tl
from tests.helpers import xlnet_streams as streams_lib

L, R, P, B = 16, 8, 2, 3  # R = L // 2: the xlnet_plm task's default context length
STEPS = 30  # of the subprocess runs


def stream_batches(tmp_path, n):
  # B continuing A: each window is then its row stream's own text, which the check of
  # the windows below reads (the memory itself is the contexts', B or no B).
  with streams_lib.random_b_prob(0.0):
    ds = recipes.get_dataset("xlnet_plm", sequence_length={"input_ids": L, "target_ids": P},
                             batch_size=B, seed=0, shuffle=False,
                             vocabulary=streams_lib.stream_vocabulary(str(tmp_path / "vocab")),
                             source=streams_lib.stream_source())
  return [{k: jnp.asarray(v) for k, v in b.items()} for b in ds.take(n).as_numpy_iterator()]


def window_text(batch, row):
  """The stream tokens of one example: its A|B [SEP] and final [SEP] [CLS] removed."""
  ids, types = np.asarray(batch["input_ids"][row]), np.asarray(batch["token_type_ids"][row])
  return list(ids[types == 0][:-1]) + list(ids[types == 1][:-1])


def concatenated_inputs(b0, b1, b2):
  """[context 1 | context 2 | segment 3] with the visibility the three steps had:
  each context sees the contexts up to itself, segment 3 sees context 2 (its memory,
  mem_len = R) and, inside itself, what its own perm_mask allows."""
  K = 2 * R + L
  prefix = lambda value, x: jnp.concatenate([jnp.full((B, 2 * R), value, x.dtype), x], 1)
  blocked = np.ones((B, K, K), np.float32)
  blocked[:, :R, :R] = 0
  blocked[:, R:2 * R, :2 * R] = 0
  blocked[:, 2 * R:, R:2 * R] = 0
  blocked[:, 2 * R:, 2 * R:] = b2["perm_mask"]
  return dict(
      input_ids=jnp.concatenate([b0["input_ids"][:, :R], b1["input_ids"][:, :R],
                                 b2["input_ids"]], 1),
      attention_mask=prefix(1, b2["attention_mask"]),
      token_type_ids=prefix(0, b2["token_type_ids"]),
      perm_mask=jnp.asarray(blocked),
      target_mapping=jnp.pad(b2["target_mapping"], ((0, 0), (0, 0), (2 * R, 0))))


def test_memory_over_three_train_steps_equals_the_concatenated_text(tmp_path):
  b0, b1, b2 = stream_batches(tmp_path, 3)
  # Each row continues: every window starts R stream tokens after the previous one,
  # so [context 1 | context 2 | segment 3] is one continuous text.
  for before, after in ((b0, b1), (b1, b2)):
    for r in range(B):
      assert window_text(after, r)[:L - 3 - R] == window_text(before, r)[R:]
  # Two layers and mem_len = R: step 3's memory (context 2, with context 1 behind it at
  # the second layer) holds no trace of step 1's zero memory, so it must equal the
  # concatenation exactly.
  cfg = xlnet.xlnet_tiny(vocab_size=streams_lib.VOCAB_SIZE, hidden_dropout=0.0, mem_len=R,
                         reuse_len=R, initializer_range=0.2)  # weights that use the memory
  model, objective = xlnet.XLNetLMHeadModel(cfg), plm.PermutationLM()
  init = train_state.init_params_fn(model, b0, objective.model_inputs)
  params = jax.jit(lambda k: nn.unbox(init(k)))(jax.random.PRNGKey(0))
  tx = optax.sgd(0.0)  # the parameters stay put; only the memory moves
  state = train_state.TrainState(step=jnp.zeros((), jnp.int32), params=params,
                                 opt_state=tx.init(params),
                                 rng=jax.random.key_data(jax.random.PRNGKey(1)))
  step = jax.jit(train_step.make_train_step(model, objective, tx, lambda s: 0.0))
  carry = objective.initial_carry(model, B)
  for batch in (b0, b1, b2):
    state, metrics, carry = step(state, batch, carry)

  out = model.apply({"params": params}, **concatenated_inputs(b0, b1, b2),
                    output_hidden_states=True)
  _, want = objective(out, b2)
  np.testing.assert_allclose(metrics["plm_loss"][0], want["plm_loss"][0], rtol=2e-5)
  # The memory after step 3: every layer's input states of context 3.
  np.testing.assert_allclose(carry["mems"],
                             jnp.swapaxes(out["hidden_states"][:-1, :, 2 * R:3 * R], 0, 1),
                             atol=2e-5)
  # ... and the memory matters: segment 3 alone predicts differently.
  _, alone = objective(model.apply({"params": params}, **objective.model_inputs(b2)), b2)
  assert abs(float(alone["plm_loss"][0] - want["plm_loss"][0])) > 1e-3


def test_run_checkpoints_hold_the_carried_memory(tmp_path):
  run = checkpoints.RunCheckpoints(str(tmp_path), async_save=False)
  state = {"w": jnp.ones(3)}
  memory = {"mems": jnp.arange(24.0).reshape(2, 1, 3, 4)}
  run.save(1, state, {"batches_consumed": 1}, carry={})  # PermutationLM(carry_memory=False)
  run.save(2, state, {"batches_consumed": 2}, carry=memory)
  target = jax.eval_shape(lambda: memory)
  assert run.restore_carry(1, target) is None
  np.testing.assert_array_equal(run.restore_carry(2, target)["mems"], memory["mems"])
  restored, extra = run.restore(2, jax.eval_shape(lambda: state))
  assert extra == {"batches_consumed": 2} and float(restored["w"][0]) == 1.0
  run.close()


def _gin_file(tmp_path, name, *extra):
  lines = [
      "include 'runs/pretrain.gin'",
      "include 'models/xlnet_tiny.gin'",
      "include 'objectives/xlnet_plm.gin'",
      "import tests.helpers.xlnet_streams",
      f"build_model.config_overrides = {{'vocab_size': {streams_lib.VOCAB_SIZE}, "
      f"'mem_len': {R + R // 2}, 'reuse_len': {R}}}",
      f"xlnet_preprocessors.reuse_len = {R}",
      "bertjax.train.inputs.task_dataset.vocabulary = @stream_vocabulary()",
      f"stream_vocabulary.directory = '{tmp_path / 'vocab'}'",
      "bertjax.train.inputs.task_dataset.source = @stream_source()",
      f"Trainer.sequence_length = {L}",
      "Trainer.batch_size = 4",
      f"Trainer.num_train_steps = {STEPS}",
      "Trainer.log_every = 1",
      "Trainer.checkpoint_every = 3",
      "Trainer.eval_every = 0",
      "Trainer.best_metric = None",
      "Trainer.show_progress = False",
      "warmup_linear_decay.peak_value = 1e-3",
      "warmup_linear_decay.warmup_steps = 5",
  ] + list(extra)
  path = tmp_path / name
  path.write_text("\n".join(lines) + "\n")
  return str(path)



@pytest.mark.slow
def test_sigkilled_xlnet_run_resumes_its_memory_bit_identical(tmp_path):
  gin_file = _gin_file(tmp_path, "run.gin")
  kill_at = random.Random().randint(4, STEPS - 4)
  crashing = _gin_file(tmp_path, "crash.gin",  # the same run, SIGKILLed at step kill_at
                       "Trainer.data_fn = @task_dataset_killed_at",
                       f"task_dataset_killed_at.kill_at_batch = {kill_at}",
                       "Trainer.async_checkpoints = False")  # step 3k is on disk at 3k + 1
  streams_lib.stream_vocabulary(str(tmp_path / "vocab"))  # written once, before the runs
  reference = tl.popen_main(gin_file, str(tmp_path / "reference"))
  interrupted = tl.popen_main(crashing, str(tmp_path / "interrupted"))
  out, _ = interrupted.communicate(timeout=900)
  assert interrupted.returncode == -signal.SIGKILL, out[-3000:]
  resumed_from = checkpoints.RunCheckpoints(str(tmp_path / "interrupted")).latest_step()
  assert resumed_from == kill_at // 3 * 3, (kill_at, resumed_from)

  restarted = tl.popen_main(gin_file, str(tmp_path / "interrupted"))
  out, _ = restarted.communicate(timeout=900)
  assert restarted.returncode == 0, out[-3000:]
  assert f"Resumed from step {resumed_from}" in out and "no carried state" not in out
  out, _ = reference.communicate(timeout=900)
  assert reference.returncode == 0, out[-3000:]

  final = lambda run, item: checkpoints.restore_numpy(
      os.path.join(str(tmp_path / run), "checkpoints", str(STEPS), item))
  for item in (checkpoints.STATE_ITEM, checkpoints.CARRY_ITEM):
    a, b = final("reference", item), final("interrupted", item)
    for (path, x), y in zip(jax.tree_util.tree_leaves_with_path(a), jax.tree.leaves(b)):
      np.testing.assert_array_equal(x, y, err_msg=f"{item}{jax.tree_util.keystr(path)} "
                                    f"(killed at step {kill_at}, resumed from {resumed_from})")
  memory = final("reference", checkpoints.CARRY_ITEM)["mems"]
  assert memory.shape == (4, 2, R + R // 2, 64)
  assert (np.abs(memory).max(axis=(0, 1, 3)) > 0).all()  # every memory slot holds states
