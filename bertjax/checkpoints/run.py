"""Periodic checkpoints of a training run under `model_dir/checkpoints/`, and resume.

One Orbax step folder per saved step, holding the item `state` (params, opt_state, step,
rng), the item `extra` (JSON: input-pipeline position, metrics) and, for objectives that
carry state between train steps (XLNet's memory), the item `carry`. Orbax writes each step
into a temporary folder and renames it on commit, so a folder killed half-way is never
listed as a step. Once committed, a step is sealed with the checksums of its files
(`checkpoints.integrity`; in the background for async saves), and every restore verifies
them first: a damaged or unsealed step is never read. `newest_intact_step` is where a run
resumes; with `set_aside` the damaged steps after it move to `damaged_checkpoints/` (beside
`checkpoints/`), so the resumed run can save those steps again.
"""
import itertools
import logging
import os
import shutil
import threading
from typing import Any, Callable, Mapping

import jax
import numpy as np
import orbax.checkpoint as ocp
# (Orbax's own default handler keeps per-host array metadata in this store; so does ours.)
from orbax.checkpoint._src.metadata import array_metadata_store

from bertjax.checkpoints import integrity
from bertjax.checkpoints.params import RUN_SUBDIR, STATE_ITEM

EXTRA_ITEM = "extra"
CARRY_ITEM = "carry"
DAMAGED_SUBDIR = "damaged_checkpoints"
_barriers = itertools.count()


def _write_each_array_whole() -> None:
  """In a single process, Orbax writes every array whole (`use_replica_parallel=False`).

  Its default slices each replicated array across the replicas so that several hosts share
  the writing. In one process that only adds an XLA slice program per array and replica to
  dispatch, and to compile at the first save: 2.4 s for the first save of a ~100-array state
  replicated over 8 CPU devices, against 0.06 s whole, and 0.5 s against 0.2 s after that.
  Across processes the default stays. The handler is process-wide (Orbax's registry), set
  alike by every RunCheckpoints, so it is chosen here from the process count.
  """
  ocp.type_handlers.register_type_handler(
      jax.Array, ocp.type_handlers.ArrayHandler(
          use_replica_parallel=jax.process_count() > 1,
          array_metadata_store=array_metadata_store.Store()),
      override=True)


class RunCheckpoints:
  """Periodic, async checkpoints of one training run, with resume.

  Keeps the last `keep` steps plus the `keep_best` steps with the best value of
  `best_metric` (an eval metric, `best_mode` 'max' or 'min'; a NaN/Inf value never
  ranks). The directory is created by the first save, not before.
  """

  def __init__(self, model_dir: str, keep: int = 3, best_metric: str | None = None,
               best_mode: str = "max", keep_best: int = 1, async_save: bool = True):
    if best_mode not in ("max", "min"):
      raise ValueError(f"best_mode must be 'max' or 'min', got {best_mode!r}.")
    policies = [ocp.checkpoint_managers.LatestN(n=keep)]
    if best_metric:
      policies.append(ocp.checkpoint_managers.BestN(
          get_metric_fn=lambda m: m[best_metric], reverse=best_mode == "min", n=keep_best,
          keep_checkpoints_without_metrics=False))
    self.best_metric = best_metric
    _write_each_array_whole()
    options = ocp.CheckpointManagerOptions(
        preservation_policy=ocp.checkpoint_managers.AnyPreservationPolicy(policies),
        enable_async_checkpointing=async_save, cleanup_tmp_directories=True, create=False)
    self.directory = os.path.join(os.path.abspath(model_dir), RUN_SUBDIR)
    self._manager = ocp.CheckpointManager(self.directory, options=options,
                                          item_names=(STATE_ITEM, EXTRA_ITEM, CARRY_ITEM))
    self._async = async_save
    self._sealing: threading.Thread | None = None
    self._seal_error: BaseException | None = None
    self._intact: set[int] = set()  # steps whose checksums this object has verified

  def latest_step(self) -> int | None:
    """The latest listed step (intact or not: see `newest_intact_step`)."""
    return self._manager.latest_step()

  def all_steps(self) -> list[int]:
    return list(self._manager.all_steps())

  def step_dir(self, step: int) -> str:
    return os.path.join(self.directory, str(step))

  # ------------------------------------------------------------------------- integrity
  def damage(self, step: int) -> str | None:
    """None when `step` is intact (sealed, every file as sealed), else what is wrong."""
    if step in self._intact:
      return None
    problem = integrity.damage(self.step_dir(step))
    if problem is None:
      self._intact.add(step)
    return problem

  def newest_intact_step(self, set_aside: bool = False,
                         log: Callable[[str], None] = logging.warning) -> int | None:
    """The newest intact step (None when there is no step at all).

    Newer damaged or unsealed steps are reported through `log`, one line each, and with
    `set_aside` moved to `damaged_checkpoints/`. With `set_aside` (the run itself, about to
    resume), the newest step, if Orbax committed it but nobody sealed it, is adopted first
    (`_adopt`): only the newest can have been cut off between the two, since a run seals
    each step before it writes the next.
    Raises CheckpointError when there are steps but none is intact.
    """
    self.wait()
    damaged = []
    steps = sorted(self.all_steps(), reverse=True)
    if set_aside and steps:
      self._adopt(steps[0], log)
    for step in steps:
      problem = self.damage(step)
      if problem is None:
        break
      damaged.append((step, problem))
    else:
      step = None
    if damaged and step is None:
      listing = "; ".join(f"{self.step_dir(s)}: {p}" for s, p in damaged)
      raise integrity.CheckpointError(
          f"No intact checkpoint in {self.directory}: {listing}. Move {self.directory} away "
          f"to start the run over, or give a new --model_dir.")
    for bad, problem in damaged:
      moved = f"; moved it to {self._set_aside(bad)}" if set_aside else ""
      log(f"Checkpoint {self.step_dir(bad)} is damaged: {problem}{moved}. Using step {step}.")
    if damaged and set_aside:
      ocp.multihost.sync_global_processes(f"bertjax_set_aside_{next(_barriers)}")
      self._manager.reload()
    return step

  def _adopt(self, step: int, log: Callable[[str], None]) -> None:
    """Seals a step that Orbax committed but that was never sealed: the process stopped
    between the two (SIGKILL, preemption). Orbax renames a step into place only once all of
    its files are written and records the commit time in its metadata, so a step whose
    files are all older than that is whole as written; sealing it now lets the run resume
    from it rather than lose it. A step changed since stays unsealed (damaged)."""
    step_dir = self.step_dir(step)
    if integrity.is_sealed(step_dir) or not integrity.committed_unchanged(step_dir):
      return
    if jax.process_index() == 0:
      integrity.seal(step_dir)
    ocp.multihost.sync_global_processes(f"bertjax_adopt_{next(_barriers)}")
    log(f"Checkpoint {step_dir} was committed but not sealed (the run stopped in between); "
        "sealed it now.")

  def _set_aside(self, step: int) -> str:
    """Moves a damaged step folder out of the run (process 0); returns where to."""
    target = os.path.join(os.path.dirname(self.directory), DAMAGED_SUBDIR, str(step))
    for n in itertools.count(2):
      if not os.path.exists(target):
        break
      target = os.path.join(os.path.dirname(target), f"{step}-{n}")
    if jax.process_index() == 0:
      os.makedirs(os.path.dirname(target), exist_ok=True)
      shutil.move(self.step_dir(step), target)
    return target

  def _seal(self, step: int) -> None:
    try:
      self._manager.wait_until_finished()
      step_dir = self.step_dir(step)
      if jax.process_index() == 0 and os.path.isdir(step_dir):
        try:
          integrity.seal(step_dir)
        except FileNotFoundError:
          if os.path.isdir(step_dir):
            raise
          # Keep-best retention deleted the step (worse than the kept ones): nothing to seal.
    except BaseException as e:  # pylint: disable=broad-except
      self._seal_error = e

  def _check_readable(self, step: int) -> None:
    problem = self.damage(step)
    if problem is not None:
      raise integrity.CheckpointError(
          f"Checkpoint {self.step_dir(step)} is damaged: {problem}. Restore an earlier step "
          f"(or delete this one to resume from the one before).")

  # ------------------------------------------------------------------------- save / restore
  def save(self, step: int, state: Any, extra: Mapping[str, Any],
           metrics: Mapping[str, float] | None = None, carry: Any = None) -> None:
    """Starts saving `state` (returns once device arrays are copied, then writes and seals
    in the background). `metrics` rank the step for keep-best; steps saved without a
    finite best metric are kept only as one of the last `keep`. `carry`: state carried
    between train steps (XLNet memory), saved with the step when given."""
    self.wait()
    self._intact.discard(step)
    if self.best_metric and (metrics is None or not np.isfinite(
        float(metrics.get(self.best_metric, np.nan)))):
      metrics = None
    items = {STATE_ITEM: ocp.args.StandardSave(state),
             EXTRA_ITEM: ocp.args.JsonSave(dict(extra))}
    if jax.tree.leaves(carry):  # (an objective may carry nothing: {})
      items[CARRY_ITEM] = ocp.args.StandardSave(carry)
    self._manager.save(step, args=ocp.args.Composite(**items),
        metrics=None if metrics is None else {k: float(v) for k, v in metrics.items()},
        force=True)
    if self._async:
      self._sealing = threading.Thread(target=self._seal, args=(step,), daemon=True,
                                       name=f"seal_checkpoint_{step}")
      self._sealing.start()
    else:
      self._seal(step)
      self._raise_seal_error()

  def batches_consumed(self, step: int | None) -> int:
    """The input position saved with `step` (0 for None: starting fresh)."""
    if step is None:
      return 0
    return int(self.extra(step).get("batches_consumed", step))

  def extra(self, step: int) -> dict[str, Any]:
    """The JSON item `extra` saved with `step` (verified first, as every restore)."""
    return dict(self._restore(step, {EXTRA_ITEM: ocp.args.JsonRestore()})[EXTRA_ITEM] or {})

  def restore(self, step: int, abstract_state: Any) -> tuple[Any, dict[str, Any]]:
    """Reads a step into the layout of `abstract_state` (ShapeDtypeStructs with shardings)."""
    restored = self._restore(step, {STATE_ITEM: ocp.args.StandardRestore(abstract_state),
                                    EXTRA_ITEM: ocp.args.JsonRestore()})
    return restored[STATE_ITEM], dict(restored[EXTRA_ITEM] or {})

  def restore_carry(self, step: int, abstract_carry: Any) -> Any | None:
    """The carried state saved with `step`, in the layout of `abstract_carry`; None
    when that step has none."""
    self._check_readable(step)
    if not os.path.isdir(os.path.join(self.step_dir(step), CARRY_ITEM)):
      return None
    return self._restore(step, {CARRY_ITEM: ocp.args.StandardRestore(abstract_carry)})[CARRY_ITEM]

  def _restore(self, step: int, args: dict) -> dict:
    """Verified, then read by Orbax; its errors become one CheckpointError line."""
    self._check_readable(step)
    try:
      return self._manager.restore(step, args=ocp.args.Composite(**args))
    except Exception as e:  # pylint: disable=broad-except
      first_line = (str(e).strip().splitlines() or [""])[0][:300]
      raise integrity.CheckpointError(
          f"Could not restore {sorted(args)} from {self.step_dir(step)} ({type(e).__name__}: "
          f"{first_line}). Does the gin model config match the run's?") from e

  def _raise_seal_error(self) -> None:
    if self._seal_error is not None:
      error, self._seal_error = self._seal_error, None
      raise integrity.CheckpointError(f"Could not seal a checkpoint in {self.directory}: "
                                      f"{type(error).__name__}: {error}") from error

  def wait(self) -> None:
    """Until every started save is committed and sealed (on every process)."""
    if self._sealing is not None:
      self._sealing.join()
      self._sealing = None
    self._manager.wait_until_finished()
    self._raise_seal_error()
    if jax.process_count() > 1:
      ocp.multihost.sync_global_processes(f"bertjax_sealed_{next(_barriers)}")

  def close(self) -> None:
    self.wait()
    self._manager.close()
