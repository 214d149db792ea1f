"""Fine-tuning under SIGTERM / SIGINT: the step finishes, the fine-tuning's state is sealed
into its output folder, the command exits 143 / 130, and the same command resumes it to the
same end as an uninterrupted run (params and results.json, but for the timings). A finished
fine-tuning's folder is never resumed into.

The runs are `finetune.run`'s command in this process (its exit status is the SystemExit's
code); the signal is sent to this process from inside the loop, after a chosen step."""
import json
import os
import random
import shutil
import signal
import socket
import sys

import gin
import jax
import numpy as np
import pytest

from bertjax import checkpoints, run_lock
from bertjax.checkpoints import converted
from bertjax.finetune import fitting, resume, run
from bertjax.checkpoints import model as hf_model
from bertjax.train import loop as train_loop, metrics as train_metrics
from tests.finetune.test_run import _tiny_hf
from tests.helpers import finetune as ftl

STEPS = 12  # 2 epochs of 6 steps, evaluated after each; train rows every 4 steps and at 6
TIMINGS = ("wall_time_s", "train_time_s", "eval_time_s", "elapsed_s", "steps_per_sec",
           "tokens_per_sec")


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
  root = tmp_path_factory.mktemp("inputs")
  hf_dir = _tiny_hf(root / "hf", "BertModel")
  ckpt = str(root / "ckpt")
  converted.save(hf_model.from_hf(hf_dir), ckpt, tokenizer_from=hf_dir)
  return ckpt, ftl.write_rte(root / "data", train_rows=6, dev_rows=4)


@pytest.fixture(scope="module")
def reference(inputs, tmp_path_factory):
  """An uninterrupted fine-tuning's output folder."""
  out = tmp_path_factory.mktemp("reference") / "out"
  assert _finetune(inputs, out) == 0
  return out


def _finetune(inputs, out, *flags) -> int:
  """`python -m bertjax.finetune.run ...` here; its exit status."""
  ckpt, data_dir = inputs
  gin.clear_config()
  run.FLAGS(["run", "--task=rte", f"--checkpoint={ckpt}", f"--output_dir={out}",
             f"--data_dir={data_dir}", "--batch_size=1", "--eval_batch_size=2",
             "--max_seq_length=16", "--num_epochs=2", "--log_every=4", *flags])
  try:
    run.cli_main([])
  except SystemExit as e:  # as the interpreter ends on it: a message is printed, status 1
    if isinstance(e.code, int):
      return e.code
    print(e.code, file=sys.stderr)
    return 1
  finally:
    run.FLAGS.unparse_flags()
  return 0


class Killed(BaseException):
  """Stands for a SIGKILL: nothing in the run catches it or saves anything for it."""


def _during(monkeypatch, step, act):
  """Calls `act()` while train step `step` runs."""
  run_steps = train_loop.TrainLoop.__post_init__

  def acting(self):
    run_steps(self)
    step_fn = self.step_fn

    def then_act(state, *args):
      done = int(state.step) + 1  # (read before the step donates `state`)
      out = step_fn(state, *args)
      if done == step:
        act()
      return out
    self.step_fn = then_act
  monkeypatch.setattr(train_loop.TrainLoop, "__post_init__", acting)


def _signal_during(monkeypatch, step, signum):
  """Sends `signum` to this process while train step `step` runs: the fine-tuning stops
  after that step."""
  _during(monkeypatch, step, lambda: os.kill(os.getpid(), signum))


def _kill_during(monkeypatch, step):
  def kill():
    raise Killed
  _during(monkeypatch, step, kill)


def _results(out):
  def strip(value):
    if isinstance(value, dict):
      return {k: strip(v) for k, v in value.items() if k not in TIMINGS}
    return [strip(v) for v in value] if isinstance(value, list) else value
  with open(os.path.join(out, "results.json")) as f:
    return strip(json.loads(f.read().replace(str(out), "OUT")))


def test_sigterm_saves_the_state_and_the_same_command_resumes_bit_identical(
    inputs, reference, tmp_path, monkeypatch, capsys):
  out = tmp_path / "preempted"
  stopped = random.Random().randint(1, 6)  # in the first epoch, or at its end
  with monkeypatch.context() as patch:
    _signal_during(patch, stopped, signal.SIGTERM)
    assert _finetune(inputs, out) == 128 + signal.SIGTERM
  err = capsys.readouterr().err
  assert f"Stopped by SIGTERM after step {stopped}, which is saved in {out}/resume/" in err, err
  assert not (out / "results.json").exists()
  assert checkpoints.RunCheckpoints(resume.folder(str(out))).damage(stopped) is None  # sealed

  # Resumed, then killed at step 9 without a newer state saved (a grace period ran out):
  # the epoch evaluated at step 6 and the rows up to 8 are written again by the next run.
  with monkeypatch.context() as patch, pytest.raises(Killed):
    _kill_during(patch, 9)
    _finetune(inputs, out)
  assert f"Resumed the fine-tuning stopped after step {stopped} " in capsys.readouterr().out

  assert _finetune(inputs, out) == 0
  assert f"Resumed the fine-tuning stopped after step {stopped} " in capsys.readouterr().out
  assert not (out / resume.RESUME_SUBDIR).exists()  # nothing left to resume
  assert _results(out) == _results(reference)
  predictions = os.path.join(fitting.PREDICTIONS_DIR, "dev", "RTE.tsv")
  assert (out / predictions).read_text() == (reference / predictions).read_text()
  got, _ = checkpoints.load_params(str(out))
  want, _ = checkpoints.load_params(str(reference))
  assert jax.tree.structure(got) == jax.tree.structure(want)
  for a, b in zip(jax.tree.leaves(want), jax.tree.leaves(got)):
    np.testing.assert_array_equal(b, a)
  # Every train row was written once, as the uninterrupted run wrote it.
  def rows(folder):
    return [(r["split"], r["step"], r.get("loss")) for r in train_metrics.read_metrics(folder)]
  assert rows(str(out)) == rows(str(reference))


def test_sigint_exits_130_and_only_the_same_fine_tuning_resumes(inputs, reference, tmp_path,
                                                                 monkeypatch, capsys):
  ckpt, data_dir = inputs
  data_dir = shutil.copytree(data_dir, tmp_path / "data")  # changed below
  out = tmp_path / "out"
  with monkeypatch.context() as patch:
    _signal_during(patch, 3, signal.SIGINT)
    assert _finetune((ckpt, data_dir), out) == 128 + signal.SIGINT
  assert "Stopped by SIGINT after step 3, which is saved" in capsys.readouterr().err
  # Other settings, or other data under the same flags, are never mixed into its state.
  assert _finetune((ckpt, data_dir), out, "--learning_rate=1e-3") == 1
  assert "holds a fine-tuning of another config" in capsys.readouterr().err
  # Nor resumed by two processes at once: this one holds it now.
  (out / run_lock.LOCK_FILE).write_text(json.dumps({"host": socket.gethostname(),
                                                    "pid": os.getpid(), "command": "test"}))
  assert _finetune((ckpt, data_dir), out) == 1
  assert f"{out} is in use by test (pid {os.getpid()} on" in capsys.readouterr().err
  (out / run_lock.LOCK_FILE).unlink()
  with open(data_dir / "glue" / "RTE" / "train.tsv", "a") as f:
    f.write("99\ta dog is dry .\tit rains .\tnot_entailment\n")
  assert _finetune((ckpt, data_dir), out) == 1
  assert ("holds a fine-tuning stopped at step 3 with other starting weights, data or "
          "settings") in capsys.readouterr().err
  assert checkpoints.RunCheckpoints(resume.folder(str(out))).all_steps() == [3]  # kept


def test_a_finished_fine_tuning_is_not_resumed(inputs, reference, capsys):
  finished = sorted(os.listdir(reference))
  assert _finetune(inputs, reference) == 1
  assert (f"--output_dir={reference} holds a finished fine-tuning (results.json); it is not "
          "resumed") in capsys.readouterr().err
  assert sorted(os.listdir(reference)) == finished
