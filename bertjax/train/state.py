"""The training state and its layout on the device mesh.

`TrainState` is everything a run needs to continue bit-exactly: parameters,
optimizer state, step and the base RNG key. Per-step randomness is derived as
`fold_in(rng, step)`, so the key itself never changes and a resumed run draws the
same dropout masks as an uninterrupted one.

Shardings come from the parameters' logical axis names (`bertjax.train.partitioning`);
optimizer moments that mirror a parameter take that parameter's sharding, anything
else (counters, Adafactor's factored row/column statistics) is replicated.
"""
from typing import Any, Callable

import flax
import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax

from bertjax.train import partitioning


@flax.struct.dataclass
class TrainState:
  step: jax.Array       # int32 scalar: optimizer steps taken
  params: Any           # float32, unboxed
  opt_state: Any
  rng: jax.Array        # uint32 raw key data (checkpoints store plain arrays)

  @property
  def key(self) -> jax.Array:
    return jax.random.wrap_key_data(self.rng)


def init_params_fn(module: nn.Module, example_batch: dict, model_inputs: Callable) -> Callable:
  """rng -> boxed params, for a module called with `model_inputs(example_batch)`."""
  def init(rng):
    return module.init({"params": rng, "dropout": rng}, **model_inputs(example_batch),
                       deterministic=True)["params"]
  return init


def state_shardings(abstract_boxed_params: Any, tx: optax.GradientTransformation, mesh,
                    rules) -> tuple[TrainState, TrainState]:
  """(abstract TrainState, TrainState of NamedShardings) for these parameters."""
  param_shardings = partitioning.shardings_for(abstract_boxed_params, mesh, rules)
  abstract_params = nn.unbox(abstract_boxed_params)
  abstract_opt = jax.eval_shape(tx.init, abstract_params)
  replicated = partitioning.replicated(mesh)

  # An optimizer leaf mirrors a parameter when its key path ends with that parameter's
  # path and the shapes agree (Adam's mu/nu, momentum); this also sees through
  # optax.masked / multi_transform wrappers, where frozen entries are empty nodes.
  by_path = {}
  for (path, param), sharding in zip(jax.tree_util.tree_leaves_with_path(abstract_params),
                                     jax.tree.leaves(param_shardings)):
    by_path[_keys(path)] = (param.shape, sharding)

  def leaf_sharding(path, leaf):
    keys = _keys(path)
    for start in range(len(keys)):
      shape, sharding = by_path.get(keys[start:], (None, None))
      if shape is not None and shape == leaf.shape:
        return sharding
    return replicated

  opt_shardings = jax.tree_util.tree_map_with_path(leaf_sharding, abstract_opt)
  abstract = TrainState(step=jax.ShapeDtypeStruct((), jnp.int32), params=abstract_params,
                        opt_state=abstract_opt,
                        rng=jax.eval_shape(lambda: jax.random.key_data(jax.random.key(0))))
  shardings = TrainState(step=replicated, params=param_shardings, opt_state=opt_shardings,
                         rng=replicated)
  return abstract, shardings


def create_state(init_fn: Callable, tx: optax.GradientTransformation, seed: int, shardings,
                 params: Any = None) -> TrainState:
  """A fresh state laid out on the mesh; `params` (host arrays) replace the random init."""
  init_key, run_key = jax.random.split(jax.random.key(seed))

  def make(key, given):
    p = nn.unbox(init_fn(key)) if given is None else given
    return TrainState(step=jnp.zeros((), jnp.int32), params=p, opt_state=tx.init(p),
                      rng=jax.random.key_data(run_key))

  if params is None:
    return jax.jit(lambda k: make(k, None), out_shardings=shardings)(init_key)
  params = partitioning.place(params, shardings.params)
  return jax.jit(make, out_shardings=shardings)(init_key, params)


def merge_pretrained(random_params: Any, pretrained: Any, source: str) -> tuple[Any, list[str]]:
  """`pretrained` weights where the model has the same path and shape, random elsewhere.

  Fine-tuning adds fresh heads (classifier) and may drop pretraining heads, so paths
  missing on either side are fine; a shape mismatch on a shared path is a mistake
  (wrong size config) and raises. Returns (params, paths kept at random init).
  """
  flat_pre = flax.traverse_util.flatten_dict(_to_dict(pretrained), sep="/")
  flat_new = flax.traverse_util.flatten_dict(_to_dict(random_params), sep="/")
  merged, fresh = {}, []
  for path, value in flat_new.items():
    if path in flat_pre:
      loaded = np.asarray(flat_pre[path])
      if loaded.shape != tuple(value.shape):
        raise ValueError(f"init_checkpoint {source!r}: parameter {path!r} has shape "
                         f"{loaded.shape} but the model expects {tuple(value.shape)}; does the "
                         f"gin model config match the checkpoint's?")
      merged[path] = loaded.astype(value.dtype)
    else:
      merged[path] = value
      fresh.append(path)
  if len(fresh) == len(flat_new):
    raise ValueError(f"init_checkpoint {source!r} shares no parameter path with the model "
                     f"(checkpoint has e.g. {sorted(flat_pre)[:3]}, model {sorted(flat_new)[:3]}).")
  return flax.traverse_util.unflatten_dict(merged, sep="/"), fresh


def _keys(path) -> tuple:
  return tuple(getattr(k, "key", getattr(k, "name", getattr(k, "idx", k))) for k in path)


def _to_dict(tree: Any) -> dict:
  return flax.core.unfreeze(tree) if isinstance(tree, flax.core.FrozenDict) else tree
