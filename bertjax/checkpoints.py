"""Checkpoints on disk: plain weights (converted / exported) and full training state.

Two layouts, both Orbax:

* A *params checkpoint* (`save_params` / `load_params`): `DIR/params/` (an Orbax
  PyTree of unboxed arrays) + `DIR/metadata.json` (free-form: family, config,
  source...). `python -m bertjax.convert` writes these; gin's `init_checkpoint`
  reads them.
* A *training run* (`CheckpointManager` under `model_dir/checkpoints/`): one folder
  per step holding the item `state` (params, opt_state, step, rng), the item
  `extra` (JSON: input-pipeline position, metrics) and, for objectives that carry
  state between train steps (XLNet's memory), the item `carry`. Orbax writes each
  step into a temporary folder and renames it on commit, so a folder killed half-way
  is never listed as a step: the latest listed step is always complete.

`load_params` accepts either layout, so fine-tuning can start from a converted
Hugging Face model or from any earlier run's model_dir.
"""
import json
import os
from typing import Any, Mapping

import jax
import numpy as np
import orbax.checkpoint as ocp

PARAMS_ITEM = "params"
METADATA_FILE = "metadata.json"
RUN_SUBDIR = "checkpoints"
STATE_ITEM = "state"
EXTRA_ITEM = "extra"
CARRY_ITEM = "carry"


def save_params(directory: str, params: Any, metadata: Mapping[str, Any] | None = None) -> None:
  """Writes `params` (a pytree of arrays, boxed or not) and JSON `metadata` to `directory`.

  Overwrites an existing params checkpoint at the same place.
  """
  directory = os.path.abspath(directory)
  os.makedirs(directory, exist_ok=True)
  params = _unbox(params)
  with ocp.StandardCheckpointer() as ckptr:
    ckptr.save(os.path.join(directory, PARAMS_ITEM), params, force=True)
    ckptr.wait_until_finished()
  if jax.process_index() == 0:
    with open(os.path.join(directory, METADATA_FILE), "w") as f:
      json.dump(dict(metadata or {}), f, indent=2, sort_keys=True, default=str)


def load_params(directory: str) -> tuple[Any, dict[str, Any]]:
  """Reads weights as host numpy arrays plus their metadata.

  `directory` may be a params checkpoint (`save_params`), a training run's
  model_dir, its `checkpoints/` folder, or one step folder of it; for a run, the
  latest complete step's params are read (the optimizer state is not).
  """
  directory = os.path.abspath(directory)
  if not os.path.isdir(directory):
    raise FileNotFoundError(f"No checkpoint directory at {directory!r}.")
  if os.path.isdir(os.path.join(directory, PARAMS_ITEM)):
    params = _restore_numpy(os.path.join(directory, PARAMS_ITEM))
    meta_path = os.path.join(directory, METADATA_FILE)
    metadata = {}
    if os.path.exists(meta_path):
      with open(meta_path) as f:
        metadata = json.load(f)
    return params, metadata
  step_dir = _find_step_dir(directory)
  if step_dir is None:
    raise FileNotFoundError(
        f"{directory!r} holds neither a params checkpoint (a '{PARAMS_ITEM}/' folder, as "
        f"written by `python -m bertjax.convert`) nor a complete training checkpoint "
        f"('{RUN_SUBDIR}/<step>/{STATE_ITEM}/').")
  state = _restore_numpy(os.path.join(step_dir, STATE_ITEM), subtree=PARAMS_ITEM)
  metadata = {"source": step_dir, "step": int(os.path.basename(step_dir))}
  return state[PARAMS_ITEM], metadata


def _unbox(tree: Any) -> Any:
  """Drops flax's logical-partitioning boxes, keeping the arrays."""
  from flax.core import meta  # Local: keep this module importable without flax's extras.
  return meta.unbox(tree)


def _restore_numpy(path: str, subtree: str | None = None) -> Any:
  """Restores an Orbax PyTree onto the host as numpy, whatever mesh wrote it.

  With `subtree`, only that top-level key is read (partial restore), so loading
  weights from a training checkpoint does not read the optimizer state.
  """
  with ocp.PyTreeCheckpointer() as ckptr:
    tree = ckptr.metadata(path).item_metadata.tree
    if subtree is not None:
      if subtree not in tree:
        raise ValueError(f"Checkpoint {path!r} has no '{subtree}' entry; has {sorted(tree)}.")
      tree = {subtree: tree[subtree]}
    restore_args = jax.tree.map(lambda _: ocp.RestoreArgs(restore_type=np.ndarray), tree)
    return ckptr.restore(path, args=ocp.args.PyTreeRestore(
        item=tree, restore_args=restore_args, partial_restore=subtree is not None))


def _find_step_dir(directory: str) -> str | None:
  """The latest complete step folder under a model_dir / checkpoints dir / step dir."""
  if os.path.isdir(os.path.join(directory, STATE_ITEM)):
    return directory
  if os.path.isdir(os.path.join(directory, RUN_SUBDIR)):
    directory = os.path.join(directory, RUN_SUBDIR)
  # Orbax's own listing ignores uncommitted temporary folders.
  steps = ocp.utils.checkpoint_steps(directory)
  if not steps:
    return None
  return os.path.join(directory, str(max(steps)))


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
