"""Device mesh and logical-axis sharding.

Models name the axes of every parameter and main activation (`embed`, `heads`,
`mlp`, ...). One rule table maps those names to mesh axes, so moving from data
parallelism to 2D data x model or FSDP-style (`embed -> data`) sharding is a gin
change, never a model change.
"""
import contextlib
import math
from typing import Any, Callable, Optional, Sequence

import flax.linen as nn
import gin
import jax
import numpy as np
from jax.experimental import mesh_utils
from jax.sharding import Mesh, NamedSharding, PartitionSpec

LogicalRules = Sequence[tuple[str, Optional[str | tuple[str, ...]]]]

# Megatron-style tensor parallelism over `model`, batch over `data`.
DEFAULT_RULES: LogicalRules = (
    ("batch", "data"),
    ("heads", "model"),
    ("mlp", "model"),
    ("vocab", "model"),
    ("embed", None),
    ("length", None),
    ("kv_length", None),
    ("kv", None),
    ("layers", None),
    ("relpos_buckets", None),
)

# Parameters sharded over `data` as well (ZeRO-3 / FSDP): embed -> data.
FSDP_RULES: LogicalRules = (("embed", "data"),) + tuple(r for r in DEFAULT_RULES if r[0] != "embed")


@gin.configurable
def axis_rules(rules: LogicalRules = DEFAULT_RULES) -> tuple:
  """The logical -> mesh axis rules of this run (bind `axis_rules.rules` in gin)."""
  return tuple((name, tuple(target) if isinstance(target, list) else target)
               for name, target in rules)


@gin.configurable
def make_mesh(shape: Sequence[int] = (-1, 1), axis_names: Sequence[str] = ("data", "model"),
              devices: Optional[Sequence[jax.Device]] = None,
              dcn_shape: Optional[Sequence[int]] = None) -> Mesh:
  """A mesh over `devices` (default: all, across every process); one -1 in shape is inferred.

  Multi-slice (`dcn_shape` given): `shape` is the mesh inside each slice (fast ICI
  links), `dcn_shape` how slices tile each axis over the slower data-center network;
  the mesh is their elementwise product. Put only `data` (or FSDP) parallelism on
  DCN. Where devices carry no slice index (CPU, GPU), each process is one slice.
  """
  devices = list(jax.devices() if devices is None else devices)
  if len(shape) != len(axis_names):
    raise ValueError(f"Mesh shape {tuple(shape)} and axis names {tuple(axis_names)} differ in length.")
  if dcn_shape is not None:
    return _multislice_mesh(shape, dcn_shape, axis_names, devices)
  shape = _infer_shape(shape, len(devices))
  try:
    device_array = mesh_utils.create_device_mesh(shape, devices)
  except (AssertionError, ValueError, NotImplementedError):
    device_array = np.asarray(devices).reshape(shape)  # CPU / unusual topologies
  return Mesh(device_array, tuple(axis_names))


def _infer_shape(shape: Sequence[int], num_devices: int, what: str = "") -> list[int]:
  """`shape` with its one -1 filled in so that it holds exactly num_devices."""
  shape = list(shape)
  if shape.count(-1) > 1:
    raise ValueError(f"Mesh shape {tuple(shape)} has more than one -1; at most one axis is inferred.")
  if -1 in shape:
    known = math.prod(s for s in shape if s != -1)
    if num_devices % known:
      raise ValueError(f"{num_devices} devices{what} do not divide into mesh shape {tuple(shape)}.")
    shape[shape.index(-1)] = num_devices // known
  if math.prod(shape) != num_devices:
    raise ValueError(f"Mesh shape {tuple(shape)} needs {math.prod(shape)} devices but "
                     f"{num_devices} are available{what}; set make_mesh.shape in gin to match.")
  return shape


def _multislice_mesh(ici_shape: Sequence[int], dcn_shape: Sequence[int],
                     axis_names: Sequence[str], devices: list) -> Mesh:
  if len(dcn_shape) != len(axis_names):
    raise ValueError(f"make_mesh.dcn_shape {tuple(dcn_shape)} and axis names "
                     f"{tuple(axis_names)} differ in length.")
  slices = math.prod(dcn_shape)
  if slices < 1 or len(devices) % slices:
    raise ValueError(f"{len(devices)} devices do not split into the {slices} slices of "
                     f"make_mesh.dcn_shape = {tuple(dcn_shape)}.")
  ici_shape = _infer_shape(ici_shape, len(devices) // slices, " per slice")
  # CPU / GPU devices report no slice or all slice 0: there, each process is a slice.
  by_process = len({getattr(d, "slice_index", None) for d in devices}) == 1
  try:
    device_array = mesh_utils.create_hybrid_device_mesh(
        ici_shape, dcn_shape, devices, process_is_granule=by_process)
  except (AssertionError, ValueError) as e:
    unit = "each process is a slice" if by_process else "TPU slices"
    raise ValueError(f"Cannot lay out mesh shape {tuple(ici_shape)} per slice x dcn_shape "
                     f"{tuple(dcn_shape)} over {len(devices)} devices ({unit}): {e}") from e
  return Mesh(device_array, tuple(axis_names))


@contextlib.contextmanager
def activation_sharding(mesh: Mesh, rules: LogicalRules):
  """Makes `nn.with_logical_constraint` inside models resolve against this mesh and rules."""
  with jax.set_mesh(mesh), nn.logical_axis_rules(rules):
    yield


def logical_specs(boxed_tree: Any) -> Any:
  """PartitionSpecs of logical names for a tree of (abstract) boxed parameters."""
  return nn.get_partition_spec(boxed_tree)


def shardings_for(boxed_tree: Any, mesh: Mesh, rules: LogicalRules) -> Any:
  """NamedShardings for every leaf of a boxed (LogicallyPartitioned) parameter tree."""
  return nn.logical_to_mesh_sharding(logical_specs(boxed_tree), mesh, rules)


def sharding_for_axes(axes: Sequence[Optional[str]], mesh: Mesh, rules: LogicalRules) -> NamedSharding:
  """NamedSharding of one array whose dimensions have these logical names."""
  return NamedSharding(mesh, nn.logical_to_mesh_axes(tuple(axes), rules))


def batch_sharding(mesh: Mesh, rules: LogicalRules) -> NamedSharding:
  """Leading (batch) dimension split as the `batch` rule says; other dimensions replicated."""
  return sharding_for_axes(("batch",), mesh, rules)


def batch_devices(mesh: Mesh, rules: LogicalRules) -> int:
  """How many devices split a batch's leading dimension (`batch_sharding`'s mesh axes)."""
  axes = batch_sharding(mesh, rules).spec[0] or ()
  return math.prod(mesh.shape[a] for a in ((axes,) if isinstance(axes, str) else axes))


def place(tree: Any, shardings: Any) -> Any:
  """Puts host arrays (e.g. converted checkpoints) onto the mesh with the given shardings."""
  return jax.device_put(tree, shardings)


def jit_sharded(fn: Callable, mesh: Mesh, rules: LogicalRules, in_shardings: Any,
                out_shardings: Any, donate_argnums: Sequence[int] = ()) -> Callable:
  """`jax.jit` with explicit shardings, traced and run under the activation rules."""
  jitted = jax.jit(fn, in_shardings=in_shardings, out_shardings=out_shardings,
                   donate_argnums=tuple(donate_argnums))

  def run(*args):
    with activation_sharding(mesh, rules):
      return jitted(*args)

  run.lower = jitted.lower
  return run


def replicated(mesh: Mesh) -> NamedSharding:
  return NamedSharding(mesh, PartitionSpec())
