"""Multi-process start on JAX's distributed runtime, with a bounded wait and clear errors.

One gin run goes from one CPU to a multi-host TPU pod slice unchanged: every host
runs the same `python -m bertjax.main ...`; `initialize` joins the processes with
`jax.distributed.initialize`, after which `jax.devices()` lists every process's
devices, `partitioning.make_mesh()` spans them all, each host reads its own shard of
the data (`train_inputs.host_shard`) and Orbax writes one globally consistent
checkpoint.

Where the processes come from:

* explicit: `--coordinator_address=HOST:PORT --num_processes=N --process_id=I`
  (or the environment: `BERTJAX_COORDINATOR_ADDRESS` / `JAX_COORDINATOR_ADDRESS`,
  `..._NUM_PROCESSES`, `..._PROCESS_ID`); process 0 hosts the coordinator at HOST:PORT.
* auto-detected: `--multihost=on` lets JAX read the cluster (Cloud TPU VM metadata,
  SLURM, Kubernetes, MPI). `--multihost=auto` (default) does so only on a Cloud TPU
  VM with more than one worker (`TPU_WORKER_HOSTNAMES`) or in a multi-slice job
  (`MEGASCALE_COORDINATOR_ADDRESS`), and otherwise runs single-process.

Failure is bounded. JAX's runtime terminates the process (a C++ CHECK, no Python
exception) when the processes do not all register in time, so a watchdog thread ends
the process first, after `timeout_s`, with a message that says what to check; a
non-coordinator first checks that the coordinator's port answers at all.
"""
import dataclasses
import os
import socket
import sys
import threading
import time
from typing import Any, Optional

from absl import flags, logging
import jax

# Exit status of a process that could not join the others (distinct from a crash).
INIT_FAILED_EXIT = 3

_COORDINATOR = flags.DEFINE_string(
    "coordinator_address", None,
    "HOST:PORT of process 0's coordinator for multi-process runs (env "
    "BERTJAX_COORDINATOR_ADDRESS or JAX_COORDINATOR_ADDRESS).")
_NUM_PROCESSES = flags.DEFINE_integer(
    "num_processes", None, "Number of processes of a multi-process run (env "
    "BERTJAX_NUM_PROCESSES or JAX_NUM_PROCESSES).")
_PROCESS_ID = flags.DEFINE_integer(
    "process_id", None, "This process's index in [0, num_processes) (env BERTJAX_PROCESS_ID "
    "or JAX_PROCESS_ID).")
_MULTIHOST = flags.DEFINE_enum(
    "multihost", "auto", ["auto", "on", "off"],
    "on: always join (JAX auto-detects the cluster when no coordinator is given); off: "
    "single process; auto: join when a coordinator is given or on a multi-worker TPU VM.")
_TIMEOUT = flags.DEFINE_integer(
    "distributed_timeout", 300, "Seconds to wait for all processes to join before failing.")


class DistributedInitError(RuntimeError):
  """The processes of a multi-process run could not be joined."""


@dataclasses.dataclass(frozen=True)
class ProcessSpec:
  """How this process joins the run; None fields are left to JAX's cluster detection."""
  coordinator_address: Optional[str] = None
  num_processes: Optional[int] = None
  process_id: Optional[int] = None

  @property
  def explicit(self) -> bool:
    return self.coordinator_address is not None

  def describe(self) -> str:
    if not self.explicit:
      return "cluster auto-detected by JAX"
    return (f"process {self.process_id} of {self.num_processes}, coordinator "
            f"{self.coordinator_address}")


def _env(name: str) -> Optional[str]:
  return os.environ.get(f"BERTJAX_{name}") or os.environ.get(f"JAX_{name}") or None


def spec_from_flags() -> ProcessSpec:
  """Flags first, then the environment."""
  def pick(flag, name, cast):
    if flag.value is not None:
      return flag.value
    value = _env(name)
    if value is None:
      return None
    try:
      return cast(value)
    except ValueError:
      raise ValueError(f"Environment variable *_{name}={value!r} is not a valid "
                       f"{cast.__name__}.") from None
  return ProcessSpec(pick(_COORDINATOR, "COORDINATOR_ADDRESS", str),
                     pick(_NUM_PROCESSES, "NUM_PROCESSES", int),
                     pick(_PROCESS_ID, "PROCESS_ID", int))


def on_multiworker_tpu() -> bool:
  """A Cloud TPU VM that is one of several workers, or one slice of a multi-slice job."""
  hosts = os.environ.get("TPU_PROCESS_ADDRESSES") or os.environ.get("TPU_WORKER_HOSTNAMES") or ""
  return len([h for h in hosts.split(",") if h]) > 1 or bool(
      os.environ.get("MEGASCALE_COORDINATOR_ADDRESS"))


def validate(spec: ProcessSpec) -> None:
  """Rejects an inconsistent explicit spec before anything waits on the network."""
  if not spec.explicit:
    if spec.num_processes is not None or spec.process_id is not None:
      raise ValueError("--num_processes / --process_id were given without "
                       "--coordinator_address=HOST:PORT (the address of process 0).")
    return
  host, sep, port = spec.coordinator_address.rpartition(":")
  if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
    raise ValueError(f"--coordinator_address={spec.coordinator_address!r}: expected HOST:PORT, "
                     f"e.g. 10.0.0.2:8476 (the address of process 0).")
  if spec.num_processes is None or spec.process_id is None:
    raise ValueError("--coordinator_address needs --num_processes=N and --process_id=I too.")
  if spec.num_processes < 1:
    raise ValueError(f"--num_processes={spec.num_processes}: must be >= 1.")
  if not 0 <= spec.process_id < spec.num_processes:
    raise ValueError(f"--process_id={spec.process_id} is outside [0, {spec.num_processes}) "
                     f"for --num_processes={spec.num_processes}.")


def _split_address(address: str) -> tuple[str, int]:
  host, _, port = address.rpartition(":")
  return host.strip("[]"), int(port)


def wait_for_coordinator(address: str, timeout_s: float) -> None:
  """Polls until the coordinator's TCP port accepts connections (process 0 may start
  later than the others); raises DistributedInitError naming the address otherwise."""
  host, port = _split_address(address)
  deadline = time.monotonic() + timeout_s
  error = None
  while time.monotonic() < deadline:
    try:
      with socket.create_connection((host, port), timeout=min(2.0, timeout_s)):
        return
    except OSError as e:  # refused, unreachable, unresolvable, timed out
      error = e
      time.sleep(0.25)
  raise DistributedInitError(
      f"Could not reach the coordinator at {address} within {timeout_s:g} s ({error}). "
      f"Is process 0 running, and is {address} its address as seen from this host (same "
      f"--coordinator_address on every process, port open in the firewall)?")


def _watchdog(spec: ProcessSpec, timeout_s: float) -> threading.Timer:
  """Ends the process with a clear message if the join takes longer than timeout_s."""
  def fire():
    sys.stderr.write(
        f"\nbertjax.distributed: the processes did not all join within {timeout_s:g} s "
        f"({spec.describe()}). Check that every process was started with the same "
        f"--coordinator_address and --num_processes, a distinct --process_id in "
        f"[0, num_processes), and that none of them failed to start. Raise "
        f"--distributed_timeout for slow starts.\n")
    sys.stderr.flush()
    os._exit(INIT_FAILED_EXIT)  # The runtime's own failure is a C++ abort; pre-empt it.
  timer = threading.Timer(timeout_s, fire)
  timer.daemon = True
  return timer


def initialize(spec: ProcessSpec, timeout_s: float = 300, heartbeat_s: int = 100) -> bool:
  """Joins this process to the others; returns False when the spec is single-process.

  Must run before anything touches a JAX backend. On CPU, cross-process collectives
  use gloo (set here in case the default changes).
  """
  validate(spec)
  if spec.explicit and spec.num_processes == 1:
    return False
  if spec.explicit and spec.process_id != 0:
    wait_for_coordinator(spec.coordinator_address, timeout_s)
  if jax.config.jax_platforms in (None, "", "cpu"):
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
  timer = _watchdog(spec, timeout_s)
  timer.start()
  try:
    # The runtime's timeouts are longer than ours so the watchdog's message comes first.
    jax.distributed.initialize(
        coordinator_address=spec.coordinator_address, num_processes=spec.num_processes,
        process_id=spec.process_id, initialization_timeout=int(timeout_s) + 30,
        heartbeat_timeout_seconds=heartbeat_s, shutdown_timeout_seconds=max(int(timeout_s), 30))
    # Building the backend exchanges the device topology: a wait of its own.
    count = jax.process_count()
  except (RuntimeError, ValueError) as e:  # e.g. cluster detection found nothing
    raise DistributedInitError(f"jax.distributed.initialize failed ({spec.describe()}): {e}") from e
  finally:
    timer.cancel()
  if spec.explicit and count != spec.num_processes:
    raise DistributedInitError(
        f"This process was started with --num_processes={spec.num_processes} but the "
        f"coordinator at {spec.coordinator_address} runs {count}; start every process with "
        f"the same --num_processes.")
  if jax.process_index() != 0:
    logging.set_verbosity(logging.ERROR)  # Warnings and info from process 0 only.
  if is_coordinator():
    print(f"Joined {jax.process_count()} processes: {jax.device_count()} devices "
          f"({jax.local_device_count()} per process, {jax.devices()[0].platform}).", flush=True)
  return True


def initialize_from_flags() -> bool:
  """`main`'s entry: joins the processes the flags / environment describe, if any."""
  if _MULTIHOST.value == "off":
    return False
  spec = spec_from_flags()
  if not spec.explicit and _MULTIHOST.value == "auto" and not on_multiworker_tpu():
    validate(spec)  # --num_processes without an address is still a mistake.
    return False
  return initialize(spec, timeout_s=_TIMEOUT.value)


def host_copy(tree: Any) -> Any:
  """Numpy copies of the whole arrays of `tree` on every process, even of arrays
  sharded across processes (which `jax.device_get` cannot fetch)."""
  if jax.process_count() == 1:
    return jax.device_get(tree)
  from jax.experimental import multihost_utils  # Local: multi-process only.
  return multihost_utils.process_allgather(tree, tiled=True)


def is_coordinator() -> bool:
  return jax.process_index() == 0
