"""Weights on disk: a *params checkpoint* and the params inside a training run.

A params checkpoint (`save_params` / `load_params`) is `DIR/params/` (an Orbax PyTree of
unboxed arrays) + `DIR/metadata.json` (free-form: family, config, source...).
`python -m bertjax.convert` writes these; gin's `init_checkpoint` reads them.

`load_params` also reads the params of a training run (bertjax.checkpoints.run), so
fine-tuning can start from a converted Hugging Face model or from any earlier run's
model_dir: the newest step whose checksums hold (`checkpoints.integrity`).
"""
import json
import logging
import os
from typing import Any, Mapping

import jax
import numpy as np
import orbax.checkpoint as ocp

from bertjax.checkpoints import integrity

PARAMS_ITEM = "params"
METADATA_FILE = "metadata.json"
RUN_SUBDIR = "checkpoints"
STATE_ITEM = "state"  # the item of a run's step folder holding params and optimizer state


def folder_holding(path: str | os.PathLike, marker: str) -> str | None:
  """The folder with file `marker` that `path` is, or whose checkpoints/ folder or step
  folder `path` is (a run's model_dir seen from inside its checkpoints)."""
  path = os.path.normpath(os.fspath(path))
  candidates = [path]
  if os.path.basename(path) == RUN_SUBDIR:
    candidates.append(os.path.dirname(path))
  elif os.path.basename(os.path.dirname(path)) == RUN_SUBDIR:
    candidates.append(os.path.dirname(os.path.dirname(path)))
  return next((c for c in candidates if os.path.isfile(os.path.join(c, marker))), None)


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
  newest intact step's params are read (the optimizer state is not). A damaged step
  folder given by name raises CheckpointError.
  """
  directory = os.path.abspath(directory)
  if not os.path.isdir(directory):
    raise FileNotFoundError(f"No checkpoint directory at {directory!r}.")
  if os.path.isdir(os.path.join(directory, PARAMS_ITEM)):
    params = restore_numpy(os.path.join(directory, PARAMS_ITEM))
    meta_path = os.path.join(directory, METADATA_FILE)
    metadata = {}
    if os.path.exists(meta_path):
      with open(meta_path) as f:
        metadata = json.load(f)
    return params, metadata
  step_dir, problem = _find_step_dir(directory)
  if step_dir is None:
    raise FileNotFoundError(
        f"{directory!r} holds neither a params checkpoint (a '{PARAMS_ITEM}/' folder, as "
        f"written by `python -m bertjax.convert`) nor a complete training checkpoint "
        f"('{RUN_SUBDIR}/<step>/{STATE_ITEM}/').")
  if problem is not None:
    hint = ("load another step folder, or the run's model_dir (its newest intact step)"
            if step_dir == directory else "no other step of this run is intact either")
    raise integrity.CheckpointError(f"Checkpoint {step_dir} is damaged: {problem}; {hint}.")
  try:
    state = restore_numpy(os.path.join(step_dir, STATE_ITEM), subtree=PARAMS_ITEM)
  except Exception as e:  # pylint: disable=broad-except
    raise integrity.CheckpointError(f"Could not read the params of {step_dir}: "
                                    f"{type(e).__name__}: {str(e)[:300]}") from e
  metadata = {"source": step_dir, "step": int(os.path.basename(step_dir))}
  return state[PARAMS_ITEM], metadata


def _unbox(tree: Any) -> Any:
  """Drops flax's logical-partitioning boxes, keeping the arrays."""
  from flax.core import meta  # Local: keep this module importable without flax's extras.
  return meta.unbox(tree)


def restore_numpy(path: str, subtree: str | None = None) -> Any:
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


def _find_step_dir(directory: str) -> tuple[str | None, str | None]:
  """(step folder, what is damaged in it): the step folder itself, or the newest intact
  step of a model_dir / checkpoints dir (the newest damaged one when none is intact)."""
  if os.path.isdir(os.path.join(directory, STATE_ITEM)):
    return directory, integrity.damage(directory, items=[STATE_ITEM])
  if os.path.isdir(os.path.join(directory, RUN_SUBDIR)):
    directory = os.path.join(directory, RUN_SUBDIR)
  # Orbax's own listing ignores uncommitted temporary folders.
  newest_damaged = (None, None)
  for step in sorted(ocp.utils.checkpoint_steps(directory), reverse=True):
    step_dir = os.path.join(directory, str(step))
    problem = integrity.damage(step_dir, items=[STATE_ITEM])
    if problem is None:
      return step_dir, None
    logging.warning("Skipping damaged checkpoint %s: %s", step_dir, problem)
    newest_damaged = newest_damaged if newest_damaged[0] else (step_dir, problem)
  return newest_damaged
