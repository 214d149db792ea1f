"""Checkpoint faults, as an adversarial user makes them: damaged, truncated or missing files,
kills at random steps and in the middle of a save, an exploding update, another model over a
run's checkpoints, evaluating nothing, re-running a finished run. Each one either recovers
(the newest intact checkpoint, a run ending bit-identical to an uninterrupted one) or stops
with one clear line; nothing damaged or non-finite is ever restored or called good."""
import json
import os
import random
import re
import shutil
import signal
import types

import gin
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bertjax import checkpoints, main
from bertjax.checkpoints import integrity, model_record
from bertjax.train import trainer
from tests.helpers import faults
from tests.helpers import trainer as tl

# The run every test starts from: checkpoints at steps 10, 15 and 20, evaluated at the end.
RUN = ["Trainer.checkpoint_every = 5"]
OVERRIDES = ("{'vocab_size': %d, 'hidden_size': 32, 'num_heads': 2, 'intermediate_size': 64, "
             "'max_position_embeddings': 64%%s}" % tl.VOCAB)


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
  model_dir = str(tmp_path_factory.mktemp("finished") / "run")
  tl.configure(*RUN)
  main.run(model_dir, "train_and_evaluate")
  gin.clear_config()
  return model_dir


def _copy(run_dir, tmp_path) -> str:
  return shutil.copytree(run_dir, str(tmp_path / "run"))


def _step(run_dir, step) -> str:
  return os.path.join(run_dir, checkpoints.RUN_SUBDIR, str(step))


def _state(step_dir):
  return checkpoints.restore_numpy(os.path.join(step_dir, checkpoints.STATE_ITEM))


def _assert_same_state(got, want, context=""):
  """Bit-identical params, optimizer state, step and RNG."""
  assert jax.tree.structure(got) == jax.tree.structure(want)
  for (path, a), b in zip(jax.tree_util.tree_leaves_with_path(want), jax.tree.leaves(got)):
    np.testing.assert_array_equal(b, a, err_msg=f"{jax.tree_util.keystr(path)} {context}")


# ----------------------------------------------------------------------- damaged files
def _saved_steps(tmp_path, steps=(1, 2, 3)):
  run = checkpoints.RunCheckpoints(str(tmp_path))
  for step in steps:  # big enough for a 4 KiB fault inside the array data
    run.save(step, {"params": {"w": jnp.full((4096,), float(step))}, "step": jnp.asarray(step)},
             {"batches_consumed": step})
  run.close()
  return checkpoints.RunCheckpoints(str(tmp_path))


def _remove(path):
  (shutil.rmtree if os.path.isdir(path) else os.remove)(path)


def _garble(path):
  with open(path, "w") as f:
    f.write("{not json")


FILE_FAULTS = {  # name: (damage done to a step folder, what the report says)
    "4 KiB of random bytes in the array data": (
        lambda d: faults.overwrite(faults.data_file(d)), r"state/.* differs from its sha256"),
    "truncated array data": (
        lambda d: faults.truncate(faults.data_file(d)), r"state/.* has \d+ bytes, \d+ when saved"),
    "Orbax's manifest deleted": (
        lambda d: _remove(os.path.join(d, "state", "manifest.ocdbt")),
        r"state/manifest.ocdbt is missing"),
    "bad array metadata": (
        lambda d: faults.overwrite(os.path.join(d, "state", "_METADATA"), 64),
        r"state/_METADATA differs"),
    "bad step metadata": (
        lambda d: faults.overwrite(os.path.join(d, "_CHECKPOINT_METADATA"), 64),
        r"^_CHECKPOINT_METADATA differs"),
    "item folder deleted": (lambda d: _remove(os.path.join(d, "extra")), r"extra/ is missing"),
    "checksums deleted (killed before sealing)": (
        lambda d: _remove(os.path.join(d, integrity.CHECKSUMS_FILE)), r"checksums.json is missing"),
    "checksums garbled": (
        lambda d: _garble(os.path.join(d, integrity.CHECKSUMS_FILE)), r"checksums.json is unreadable"),
}


@pytest.mark.parametrize("fault", sorted(FILE_FAULTS))
def test_a_damaged_step_is_never_restored_and_the_previous_one_is_used(tmp_path, fault):
  run = _saved_steps(tmp_path)
  damage, report = FILE_FAULTS[fault]
  damage(_step(str(tmp_path), 3))
  assert re.search(report, run.damage(3)), run.damage(3)
  with pytest.raises(checkpoints.CheckpointError, match=r"checkpoints/3 is damaged"):
    run.restore(3, jax.eval_shape(lambda: {"params": {"w": jnp.zeros(4096)},
                                           "step": jnp.asarray(0)}))
  if not report.startswith("extra"):  # (weights alone are read from an intact state/)
    params, meta = checkpoints.load_params(str(tmp_path))  # reads around it, leaves it
    assert meta["step"] == 2 and float(params["w"][0]) == 2.0
    with pytest.raises(checkpoints.CheckpointError, match="checkpoints/3 is damaged"):
      checkpoints.load_params(_step(str(tmp_path), 3))

  messages = []
  if fault.startswith("checksums deleted"):  # the run adopts a committed, unchanged step
    assert run.newest_intact_step(set_aside=True, log=messages.append) == 3
    assert re.search(r"checkpoints/3 was committed but not sealed .* sealed it now", messages[0])
    return
  assert run.newest_intact_step(set_aside=True, log=messages.append) == 2
  assert len(messages) == 1 and re.search(r"checkpoints/3 is damaged: .*; moved it to .*"
                                          r"damaged_checkpoints/3\. Using step 2\.", messages[0])
  assert run.all_steps() == [1, 2]
  run.save(3, {"params": {"w": jnp.full((4096,), 7.0)}, "step": jnp.asarray(3)}, {})
  run.close()  # the resumed run saves step 3 again, intact
  assert checkpoints.RunCheckpoints(str(tmp_path)).newest_intact_step() == 3


def test_a_step_changed_after_its_commit_is_not_adopted(tmp_path):
  run = _saved_steps(tmp_path, steps=(1, 2))
  step_dir = _step(str(tmp_path), 2)
  _remove(os.path.join(step_dir, integrity.CHECKSUMS_FILE))
  data = faults.data_file(step_dir)
  faults.overwrite(data)
  os.utime(data, (os.path.getatime(data), os.path.getmtime(data) + 60))  # written later
  messages = []
  assert run.newest_intact_step(set_aside=True, log=messages.append) == 1
  assert "checksums.json is missing" in messages[0]


def test_no_intact_step_is_a_clear_stop(tmp_path):
  run = _saved_steps(tmp_path, steps=(1, 2))
  faults.truncate(faults.data_file(_step(str(tmp_path), 2)))
  _remove(os.path.join(_step(str(tmp_path), 1), integrity.CHECKSUMS_FILE))
  data = faults.data_file(_step(str(tmp_path), 1))  # changed after its commit: not adopted
  os.utime(data, (os.path.getatime(data), os.path.getmtime(data) + 60))
  with pytest.raises(checkpoints.CheckpointError,
                     match=r"No intact checkpoint in .*checkpoints/2: state/.* has .*"
                           r"checkpoints/1: checksums.json is missing.*give a new --model_dir"):
    run.newest_intact_step(set_aside=True)
  assert run.all_steps() == [1, 2]  # nothing moved
  with pytest.raises(checkpoints.CheckpointError, match="no other step of this run is intact"):
    checkpoints.load_params(str(tmp_path))


def test_damaged_checkpoints_fall_back_and_the_run_ends_as_if_uninterrupted(finished_run,
                                                                           tmp_path, capsys):
  run_dir = _copy(finished_run, tmp_path)
  uninterrupted = _state(_step(run_dir, 20))
  faults.overwrite(faults.data_file(_step(run_dir, 20)))
  _remove(os.path.join(_step(run_dir, 15), integrity.CHECKSUMS_FILE))
  tl.configure(*RUN)
  main.run(run_dir, "train")
  out = capsys.readouterr().out
  assert re.search(r"checkpoints/20 is damaged: state/\S+ differs from its sha256", out), out
  assert "checkpoints/15 is damaged: checksums.json is missing" in out
  assert "Resumed from step 10" in out
  assert sorted(os.listdir(os.path.join(run_dir, "damaged_checkpoints"))) == ["15", "20"]
  _assert_same_state(_state(_step(run_dir, 20)), uninterrupted)


@pytest.mark.slow
def test_killed_at_random_steps_and_during_saves_resumes_bit_identical(tmp_path):
  """Four processes: killed after a random step, while Orbax writes a step, after Orbax
  committed a step but before its checksums, then to the end; == one uninterrupted run."""
  total, every = 16, 2
  gin_file = tl.write_gin(str(tmp_path / "run.gin"), [
      f"Trainer.num_train_steps = {total}", f"Trainer.checkpoint_every = {every}",
      "Trainer.log_every = 1", "Trainer.keep_checkpoints = 2"])
  cache = tmp_path / "xla_cache"
  reference = faults.popen_main(gin_file, str(tmp_path / "reference"), compile_cache=cache)
  out, err = reference.communicate(timeout=900)
  assert reference.returncode == 0, err[-3000:]

  rng = random.Random()
  killed = rng.randint(5, 8)  # after this step (the save before it may still be sealing)
  in_save = rng.randrange(killed + 1, 11) // every * every + every  # while Orbax writes
  unsealed = rng.randrange(in_save + every, 15, every)  # committed, not yet sealed
  plan = f"(killed after step {killed}, in save {in_save}, before sealing {unsealed})"
  model_dir = str(tmp_path / "interrupted")
  outputs, resumed = [], []
  for kill_at in (f"step:{killed}", f"save:{in_save}", f"seal:{unsealed}", None):
    if outputs:
      resumed.append(checkpoints.RunCheckpoints(model_dir).newest_intact_step())
    proc = faults.popen_main(gin_file, model_dir, kill_at=kill_at, compile_cache=cache)
    out, err = proc.communicate(timeout=900)
    outputs.append(out)
    assert proc.returncode == (-signal.SIGKILL if kill_at else 0), f"{plan}: {err[-3000:]}"
  last_save = (killed - 1) // every * every
  # A reader leaves the committed, unsealed step alone; the run itself adopts it.
  assert resumed == [resumed[0], in_save - every, unsealed - every], plan
  assert resumed[0] in (last_save, last_save - every), plan
  for out, step in zip(outputs[1:], resumed[:2] + [unsealed]):
    assert f"Resumed from step {step} " in out, f"{plan}: {out[-2000:]}"
  assert re.search(rf"checkpoints/{unsealed} was committed but not sealed .* sealed it now",
                   outputs[-1]), plan
  _assert_same_state(_state(_step(model_dir, total)),
                     _state(_step(str(tmp_path / "reference"), total)), plan)


def test_main_stops_with_one_line_when_no_checkpoint_is_intact(finished_run, tmp_path):
  run_dir = _copy(finished_run, tmp_path)
  for step in (10, 15, 20):
    faults.overwrite(faults.data_file(_step(run_dir, step)), seed=step)
  config_before = open(os.path.join(run_dir, main.CONFIG_FILE)).read()
  proc = faults.popen_main(tl.write_gin(str(tmp_path / "run.gin"), RUN), run_dir)
  _, err = proc.communicate(timeout=600)
  assert proc.returncode == 1, err[-3000:]
  assert "Traceback" not in err and "Event loop" not in err, err[-3000:]
  last = err.strip().splitlines()[-1]
  assert last.startswith(f"Stopped: No intact checkpoint in {run_dir}/checkpoints: ") and all(
      f"checkpoints/{s}: state/" in last for s in (10, 15, 20)), err[-3000:]
  assert open(os.path.join(run_dir, main.CONFIG_FILE)).read() == config_before


# ----------------------------------------------------------------------- non-finite state
def test_an_exploding_update_never_reaches_a_checkpoint(tmp_path):
  tl.configure("Trainer.checkpoint_every = 1", "Trainer.log_every = 1",
               "warmup_linear_decay.peak_value = 3e38")
  with pytest.raises(trainer.NonFiniteLossError) as stopped:
    trainer.Trainer(model_dir=str(tmp_path)).run("train")
  found = re.search(r"NaN/Inf at step (\d+).* last good checkpoint is step (\d+)",
                    str(stopped.value))
  assert found, stopped.value
  bad, good = int(found[1]), int(found[2])
  run = checkpoints.RunCheckpoints(str(tmp_path))
  assert run.all_steps() == list(range(max(1, bad - 3), bad)) and good == bad - 1
  for step in run.all_steps():
    assert run.damage(step) is None
    assert all(np.isfinite(x).all() for x in jax.tree.leaves(_state(_step(str(tmp_path), step))))
  # The update before the bad step did explode (finite, astronomically large weights).
  assert max(np.abs(x).max() for x in jax.tree.leaves(_state(_step(str(tmp_path), good))["params"])) > 1e30


def test_a_nonfinite_optimizer_state_is_not_saved(tmp_path):
  tl.configure()
  job = trainer.Trainer(model_dir=str(tmp_path))
  state = types.SimpleNamespace(params={"w": jnp.ones(3)},
                                opt_state={"nu": jnp.array([1.0, jnp.inf, 0.0])})
  job._check_finite(4, types.SimpleNamespace(params=state.params, opt_state={}), None)
  with pytest.raises(trainer.NonFiniteLossError, match=r"optimizer state .* NaN/Inf at step 4; "
                     r"not saved.*last good checkpoint is none"):
    job._check_finite(4, state, None)


def test_a_nonfinite_metric_never_ranks_best(tmp_path):
  run = checkpoints.RunCheckpoints(str(tmp_path), keep=1, best_metric="loss", best_mode="min")
  for step, loss in ((1, 2.0), (2, float("nan")), (3, 3.0), (4, 4.0)):
    run.save(step, {"w": jnp.full((2,), float(step))}, {}, metrics={"loss": loss})
  run.close()
  assert run.all_steps() == [1, 4]  # the best (finite) and the last


# ----------------------------------------------------------------------- wrong model / run
def _overrides(extra=""):
  return "build_model.config_overrides = " + OVERRIDES % extra


@pytest.mark.parametrize("bindings, refused", [
    (["build_model.config = 'bertjax.models.bert.bert_mini'"], r"config.num_layers 2 -> 4"),
    ([_overrides(", 'hidden_act': 'gelu_new'")], r"config.hidden_act 'gelu' -> 'gelu_new'"),
    ([_overrides(", 'hidden_dropout': 0.0")], r"config.hidden_dropout 0.1 -> 0.0"),
])
def test_resuming_with_another_model_is_refused_before_anything_runs(finished_run, tmp_path,
                                                                     bindings, refused):
  run_dir = _copy(finished_run, tmp_path)
  before = {name: open(os.path.join(run_dir, name)).read()
            for name in (main.CONFIG_FILE, "metrics.jsonl", model_record.RECORD_FILE)}
  tl.configure(*RUN, *bindings, "Trainer.num_train_steps = 25")
  field = re.search(r"config\.(\w+)", refused)[1]
  with pytest.raises(model_record.ModelChangedError,
                     match=refused + r".*new --model_dir.*Trainer.allow_config_change = "
                           + re.escape(f"('{field}',)")):
    main.run(run_dir, "train")
  for name, text in before.items():  # config.gin and the run's logs untouched
    assert open(os.path.join(run_dir, name)).read() == text, name
  assert not os.path.exists(os.path.join(run_dir, "damaged_checkpoints"))


def test_an_allowed_change_resumes_and_is_recorded(finished_run, tmp_path, capsys):
  run_dir = _copy(finished_run, tmp_path)
  tl.configure(*RUN, _overrides(", 'hidden_dropout': 0.0"), "Trainer.num_train_steps = 22",
               "Trainer.allow_config_change = ('hidden_dropout',)")
  summary = main.run(run_dir, "train")
  assert summary["step"] == 22 and "Resumed from step 20" in capsys.readouterr().out
  with open(os.path.join(run_dir, model_record.RECORD_FILE)) as f:
    record = json.load(f)
  assert record["model"]["config.hidden_dropout"] == 0.0
  assert record["changes"] == [{"step": 20, "fields": {"config.hidden_dropout": [0.1, 0.0]}}]
  assert "'hidden_dropout': 0.0" in open(os.path.join(run_dir, main.CONFIG_FILE)).read()


def test_evaluate_needs_a_checkpoint_or_an_init_checkpoint(finished_run, tmp_path):
  tl.configure(*RUN)
  with pytest.raises(checkpoints.CheckpointError, match=r"--mode=evaluate: .*typo holds no "
                     r"checkpoint to evaluate \(the folder does not exist\).*init_checkpoint"):
    main.run(str(tmp_path / "typo"), "evaluate")
  assert not (tmp_path / "typo").exists()
  (tmp_path / "empty").mkdir()
  with pytest.raises(checkpoints.CheckpointError, match=r"empty holds no checkpoint to evaluate "
                     r"\(no checkpoints/<step>/ folder"):
    main.run(str(tmp_path / "empty"), "evaluate")
  assert os.listdir(tmp_path / "empty") == []  # no config.gin, no results.json
  gin.clear_config()
  tl.configure(*RUN, f"Trainer.init_checkpoint = '{finished_run}'")
  results = main.run(str(tmp_path / "empty"), "evaluate")
  with open(os.path.join(finished_run, trainer.RESULTS_FILE)) as f:
    assert results == json.load(f)["eval"]  # the same weights, the same evaluation


@pytest.mark.parametrize("mode", ["train_and_evaluate", "train"])
def test_rerunning_a_finished_run_keeps_its_results(finished_run, tmp_path, capsys, mode):
  run_dir = _copy(finished_run, tmp_path)
  results_path = os.path.join(run_dir, trainer.RESULTS_FILE)
  before = open(results_path).read()
  tl.configure(*RUN)
  summary = main.run(run_dir, mode)
  assert "is already finished: its newest checkpoint is step 20" in capsys.readouterr().out
  assert open(results_path).read() == before
  assert summary["eval"] == json.loads(before)["eval"] and summary["eval"]["mlm_accuracy"] >= 0
