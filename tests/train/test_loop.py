"""The shared training loop on a scripted step: rows, pauses, the non-finite stop / skip."""
import json

import jax.numpy as jnp
import numpy as np
import pytest

from bertjax.train import loop as train_loop, metrics as train_metrics

ONE = jnp.ones((), jnp.float32)


def _step(bad_steps=()):
  """A step whose state counts steps; its loss is the step number, NaN at `bad_steps`."""
  def step(state, batch, carry=None):
    done = state + 1
    loss = np.nan if done in bad_steps else float(done)
    metrics = {"loss": (jnp.float32(loss), ONE), "accuracy": (jnp.float32(batch["x"]), ONE * 2),
               "nonfinite": (jnp.float32(done in bad_steps), ONE)}
    return (done, metrics) if carry is None else (done, metrics, carry + [done])
  return step


def _batches(n=100):
  return iter([{"x": np.float32(i), "attention_mask": np.ones((2, 3))} for i in range(n)])


def _rows(directory):
  return [json.loads(l) for l in (directory / train_metrics.METRICS_FILE).read_text().splitlines()]


def _loop(tmp_path, step, **kw):
  writer = train_metrics.MetricsWriter(str(tmp_path), 0, show_progress=False, tensorboard=False)
  return train_loop.TrainLoop(step, writer, kw.pop("log_every", 3),
                              tokens=lambda b: b["attention_mask"].size, **kw), writer


def test_rows_every_log_every_at_pauses_and_at_the_end(tmp_path):
  runner, writer = _loop(tmp_path, _step(), flops_per_token=10.0)
  seen_at_pause = []
  pause = lambda step, state, carry: seen_at_pause.append((step, state, len(_rows(tmp_path))))
  state, carry, rows = runner.run(2, _batches(), 2, 10, pause_at=lambda s: s == 4,
                                  on_pause=pause)
  writer.close()
  assert state == 10 and carry is None
  assert [r["step"] for r in rows] == [3, 4, 6, 9, 10]
  assert seen_at_pause == [(4, 4, 2)]  # the pause came after its row was written
  written = _rows(tmp_path)
  assert [r["step"] for r in written] == [3, 4, 6, 9, 10]
  # Means over each row's steps: loss = step numbers, accuracy = sum(x) / (2 per step).
  assert [r["loss"] for r in written] == [3.0, 4.0, 5.5, 8.0, 10.0]
  assert written[2]["accuracy"] == pytest.approx((2 + 3) / 4)
  assert all(r["nonfinite"] == 0 and r["split"] == "train" for r in written)
  # The first step (compilation) is not timed: the first row has no throughput.
  assert "steps_per_sec" not in written[0]
  for r in written[1:]:
    assert r["tokens_per_sec"] == pytest.approx(6 * r["steps_per_sec"])
    assert r["model_flops_per_sec"] == pytest.approx(10 * r["tokens_per_sec"])
  assert all(r["elapsed_s"] >= 0 for r in rows)


def test_carried_state_goes_from_step_to_step(tmp_path):
  runner, writer = _loop(tmp_path, _step())
  _, carry, _ = runner.run(0, _batches(), 0, 4, carry=[])
  writer.close()
  assert carry == [1, 2, 3, 4]


def test_nonfinite_stop_names_the_step_before_the_pause_runs(tmp_path):
  runner, writer = _loop(tmp_path, _step(bad_steps=(5,)), log_every=10,
                         advice=lambda: "lower the rate.")
  paused = []
  with pytest.raises(train_loop.NonFiniteLossError,
                     match=r"NaN/Inf at step 5\. Stopped; lower the rate\.$"):
    runner.run(0, _batches(), 0, 20, pause_at=lambda s: s == 6,
               on_pause=lambda *args: paused.append(args))
  writer.close()
  assert not paused and not _rows(tmp_path)


def test_nonfinite_skip_counts_and_reports_the_steps(tmp_path, capsys):
  runner, writer = _loop(tmp_path, _step(bad_steps=(2, 3)), on_nonfinite="skip")
  runner.run(0, _batches(), 0, 6)
  writer.close()
  assert [r["nonfinite"] for r in _rows(tmp_path)] == [2.0, 0.0]
  assert "Skipped 2 non-finite step(s): [2, 3]" in capsys.readouterr().out


def test_running_out_of_data_and_bad_settings_are_clear_errors(tmp_path):
  runner, writer = _loop(tmp_path, _step(), data_name="The toy data")
  with pytest.raises(ValueError, match="The toy data ran out after 2 steps"):
    runner.run(0, _batches(2), 0, 5)
  writer.close()
  with pytest.raises(ValueError, match="on_nonfinite='ignore'"):
    _loop(tmp_path, _step(), on_nonfinite="ignore")
  with pytest.raises(ValueError, match="log_every=0"):
    _loop(tmp_path, _step(), log_every=0)


def test_log_prints_every_row(tmp_path):
  lines = []
  runner, writer = _loop(tmp_path, _step(), log=lines.append)
  runner.run(0, _batches(), 0, 3)
  writer.close()
  assert len(lines) == 1 and lines[0].startswith("step 3/3 accuracy=0.5, loss=2, nonfinite=0")
