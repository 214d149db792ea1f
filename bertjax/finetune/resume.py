"""A fine-tuning stopped by SIGTERM / SIGINT, kept in its folder, and resumed by the same command.

`selection.fit` trains under `train.preemption.Watch`. A signal ends training after the
current step; the fit then writes where it stands into DIR/resume/ (DIR: the fit's folder
in the output_dir) as one sealed checkpoint of `checkpoints.RunCheckpoints`
(resume/checkpoints/<step>/, verified before it is read): the item `state` holds the train
state (params, optimizer state, step, dropout RNG), the JSON item `extra` the `Progress`
(the evaluated epochs and the best so far, the train rows written, the step metrics not
written yet) and the fit's `fingerprint`. The data position is the step: the epochs'
batches are drawn again from the seed, skipping the trained ones (`loop.train_batches`).
The command then exits 143 (SIGTERM) or 130 (SIGINT), as the trainer does.

Run again with the same output folder, the command finds that state (`claim` accepts the
folder as its own), `load`s it and trains on from its step; the run ends exactly as an
uninterrupted one (same params, same results.json but for its timings). The state is
removed once training is over, so a finished fine-tuning's folder (results.json) is
refused like any other existing output. Starting weights, data or recipe other than the
stopped run's are refused (their fingerprint differs), never mixed into its state.
"""
import dataclasses
import hashlib
import json
import os
import shutil
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from bertjax import checkpoints, output_paths, run_lock
from bertjax.train import metrics as train_metrics

RESUME_SUBDIR = "resume"
RESULTS_FILE = "results.json"  # written by finetune.run / fine_tune once the run is done
CONFIG_FILE = "config.gin"     # finetune.run's first file, before anything is trained


class ResumeError(ValueError):
  """A stopped fine-tuning's state that this run cannot continue (the message says why)."""


@dataclasses.dataclass
class Progress:
  """Where a stopped fit stands, besides its train state."""
  step: int
  epochs: list[dict[str, Any]]       # selection.fit's evaluated epochs
  best: dict[str, Any]               # the best so far ({} before the first evaluation)
  history: list[dict[str, float]]    # the train rows written
  unflushed: list[dict[str, Any]]    # step metrics not written yet (train.loop)


def folder(directory: str) -> str:
  return os.path.join(directory, RESUME_SUBDIR)


def _checkpoints(directory: str) -> checkpoints.RunCheckpoints:
  return checkpoints.RunCheckpoints(folder(directory), keep=1, async_save=False)


def fingerprint(config: Any, arrays: dict[str, np.ndarray], num_steps: int, metric: str,
                state: Any) -> str:
  """What makes a fit the same fit: its recipe (but the progress bar), steps, selection
  metric, training rows and starting weights and dropout RNG (the optimizer state starts
  from them)."""
  recipe = {k: v for k, v in dataclasses.asdict(config).items() if k != "show_progress"}
  digest = hashlib.sha256(repr((sorted(recipe.items()), num_steps, metric)).encode())
  for name in sorted(arrays):
    digest.update(f"{name}{arrays[name].shape}{arrays[name].dtype}".encode())
    digest.update(np.ascontiguousarray(arrays[name]).tobytes())
  for path, leaf in jax.tree_util.tree_leaves_with_path(jax.device_get((state.params,
                                                                       state.rng))):
    digest.update(jax.tree_util.keystr(path).encode())
    digest.update(np.ascontiguousarray(leaf).tobytes())
  return digest.hexdigest()


def _encode(metrics: list[dict[str, Any]]) -> list[dict[str, Any]]:
  """Step metrics ({name: (sum, count)} of arrays) as JSON that decodes to the same bits."""
  def array(a):
    a = np.asarray(a)
    return {"dtype": str(a.dtype), "shape": list(a.shape), "values": a.ravel().tolist()}
  return [{k: [array(v) for v in pair] for k, pair in m.items()} for m in metrics]


def _decode(metrics: list[dict[str, Any]]) -> list[dict[str, Any]]:
  def array(d):
    return np.asarray(d["values"], dtype=jnp.dtype(d["dtype"])).reshape(d["shape"])
  return [{k: tuple(array(v) for v in pair) for k, pair in m.items()} for m in metrics]


def save(directory: str, state: Any, progress: Progress, identity: str) -> str:
  """Writes and seals the resumable state (replacing an earlier one); returns its folder."""
  ckpts = _checkpoints(directory)
  try:
    extra = {**dataclasses.asdict(progress), "unflushed": _encode(progress.unflushed),
             "fingerprint": identity}
    ckpts.save(progress.step, state, extra)
  finally:
    ckpts.close()
  return ckpts.step_dir(progress.step)


def load(directory: str, state: Any, identity: str) -> tuple[Any, Progress] | None:
  """(the train state, in `state`'s layout, and the progress) of the fit stopped in
  `directory`; None when there is none. Raises ResumeError when it is another fit's, and
  checkpoints.CheckpointError when it is damaged."""
  if not os.path.isdir(os.path.join(folder(directory), checkpoints.RUN_SUBDIR)):
    return None
  ckpts = _checkpoints(directory)
  try:
    step = ckpts.newest_intact_step(set_aside=True)
    if step is None:
      return None
    if ckpts.extra(step).get("fingerprint") != identity:
      raise ResumeError(
          f"{directory} holds a fine-tuning stopped at step {step} with other starting "
          "weights, data or settings than this run's; rerun the command that started it to "
          "resume it, or overwrite the output folder to start over.")
    target = jax.tree.map(lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=a.sharding),
                          state)
    restored, extra = ckpts.restore(step, target)
  finally:
    ckpts.close()
  fields = {f.name for f in dataclasses.fields(Progress)}
  progress = Progress(**{k: v for k, v in extra.items() if k in fields})
  progress.unflushed = _decode(progress.unflushed)
  return restored, progress


def rewind(directory: str, step: int) -> None:
  """Removes what the fit in `directory` wrote after `step`, the state it resumes from: a
  resumed run killed later without saving a newer state (SIGKILL, a grace period over) left
  the selection's checkpoints of later epochs and later metrics rows, which the run writes
  again."""
  selection = os.path.join(directory, checkpoints.RUN_SUBDIR)
  for name in os.listdir(selection) if os.path.isdir(selection) else ():
    if name.isdigit() and int(name) > step:
      shutil.rmtree(os.path.join(selection, name))
  path = os.path.join(directory, train_metrics.METRICS_FILE)
  if os.path.isfile(path):
    with open(path) as f:
      lines = [line for line in f if line.strip() and json.loads(line)["step"] <= step]
    with open(f"{path}.partial", "w") as f:
      f.writelines(lines)
    os.replace(f"{path}.partial", path)


def clear(directory: str) -> None:
  """Removes the resumable state (training is over)."""
  shutil.rmtree(folder(directory), ignore_errors=True)


def stopped_in(output_dir: str) -> bool:
  """Whether `output_dir` (or one of its fits' folders) holds a stopped fit's state."""
  return any(os.path.isdir(folder(os.path.join(output_dir, name)))
             for name in ["", *sorted(os.listdir(output_dir))])


def claim(output_dir: str, flag: str, overwrite: bool, reads, config: str | None = None) -> bool:
  """`output_paths.claim_folder` for a fine-tuning; True when the folder is this command's
  own to resume: it holds a stopped fine-tuning's state, or nothing but the config.gin of
  a run stopped before it trained (`config`: this run's, compared with it). A finished
  fine-tuning's folder is refused, saying so."""
  resumes = []

  def own(path: str) -> bool:
    if os.path.exists(os.path.join(path, RESULTS_FILE)):
      raise output_paths.OutputError(
          f"{flag}={path} holds a finished fine-tuning ({RESULTS_FILE}); it is not resumed. "
          "Give a new output folder, or overwrite it to fine-tune again.")
    saved = _read(os.path.join(path, CONFIG_FILE))
    if config is not None and saved is not None and saved != config:
      raise output_paths.OutputError(
          f"{flag}={path} holds a fine-tuning of another config ({CONFIG_FILE} differs from "
          "this command's); rerun its own command to resume it, or overwrite it.")
    started_only = set(os.listdir(path)) <= {CONFIG_FILE, run_lock.LOCK_FILE,
                                             *output_paths.RUNNER_FILES}
    resumes.append(stopped_in(path) or (saved is not None and started_only))
    return resumes[-1]

  output_paths.claim_folder(output_dir, flag, overwrite, reads, own=own)
  return bool(resumes and resumes[-1])


def _read(path: str) -> str | None:
  try:
    with open(path) as f:
      return f.read()
  except FileNotFoundError:
    return None
