"""Periodic checkpoints of a training run under `model_dir/checkpoints/`, and resume.

One Orbax step folder per saved step, holding the item `state` (params, opt_state, step,
rng), the item `extra` (JSON: input-pipeline position, metrics) and, for objectives that
carry state between train steps (XLNet's memory), the item `carry`. Orbax writes each step
into a temporary folder and renames it on commit, so a folder killed half-way is never
listed as a step: the latest listed step is always complete.
"""
import os
from typing import Any, Mapping

import jax
import orbax.checkpoint as ocp

from bertjax.checkpoints.params import RUN_SUBDIR, STATE_ITEM

EXTRA_ITEM = "extra"
CARRY_ITEM = "carry"


class RunCheckpoints:
  """Periodic, async checkpoints of one training run, with resume.

  Keeps the last `keep` steps plus the `keep_best` steps with the best value of
  `best_metric` (an eval metric, `best_mode` 'max' or 'min'). Orbax commits a step
  atomically (temporary folder + rename), so after a crash `latest_step` is the
  last *complete* checkpoint and leftover temporary folders are deleted.
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
    options = ocp.CheckpointManagerOptions(
        preservation_policy=ocp.checkpoint_managers.AnyPreservationPolicy(policies),
        enable_async_checkpointing=async_save, cleanup_tmp_directories=True, create=True)
    self.directory = os.path.join(os.path.abspath(model_dir), RUN_SUBDIR)
    self._manager = ocp.CheckpointManager(self.directory, options=options,
                                          item_names=(STATE_ITEM, EXTRA_ITEM, CARRY_ITEM))

  def latest_step(self) -> int | None:
    return self._manager.latest_step()

  def all_steps(self) -> list[int]:
    return list(self._manager.all_steps())

  def batches_consumed(self) -> int:
    """The input position of the latest complete step (0 when starting fresh)."""
    step = self.latest_step()
    if step is None:
      return 0
    extra = self._manager.restore(step, args=ocp.args.Composite(**{
        EXTRA_ITEM: ocp.args.JsonRestore()}))[EXTRA_ITEM] or {}
    return int(extra.get("batches_consumed", step))

  def save(self, step: int, state: Any, extra: Mapping[str, Any],
           metrics: Mapping[str, float] | None = None, carry: Any = None) -> None:
    """Starts saving `state` (returns once device arrays are copied, then writes in the
    background). `metrics` rank the step for keep-best; steps saved without the best
    metric are kept only as one of the last `keep`. `carry`: state carried between
    train steps (XLNet memory), saved with the step when given."""
    if self.best_metric and (metrics is None or self.best_metric not in metrics):
      metrics = None
    items = {STATE_ITEM: ocp.args.StandardSave(state),
             EXTRA_ITEM: ocp.args.JsonSave(dict(extra))}
    if jax.tree.leaves(carry):  # (an objective may carry nothing: {})
      items[CARRY_ITEM] = ocp.args.StandardSave(carry)
    self._manager.save(step, args=ocp.args.Composite(**items),
        metrics=None if metrics is None else {k: float(v) for k, v in metrics.items()},
        force=True)

  def restore(self, step: int, abstract_state: Any) -> tuple[Any, dict[str, Any]]:
    """Reads a step into the layout of `abstract_state` (ShapeDtypeStructs with shardings)."""
    restored = self._manager.restore(step, args=ocp.args.Composite(**{
        STATE_ITEM: ocp.args.StandardRestore(abstract_state),
        EXTRA_ITEM: ocp.args.JsonRestore()}))
    return restored[STATE_ITEM], dict(restored[EXTRA_ITEM] or {})

  def restore_carry(self, step: int, abstract_carry: Any) -> Any | None:
    """The carried state saved with `step`, in the layout of `abstract_carry`; None
    when that step has none."""
    if CARRY_ITEM not in self._manager.item_metadata(step):
      return None
    return self._manager.restore(step, args=ocp.args.Composite(**{
        CARRY_ITEM: ocp.args.StandardRestore(abstract_carry)}))[CARRY_ITEM]

  def wait(self) -> None:
    self._manager.wait_until_finished()

  def close(self) -> None:
    self._manager.wait_until_finished()
    self._manager.close()
