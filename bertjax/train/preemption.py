"""Preemption: SIGTERM (what a TPU VM's preemption sends) or SIGINT ends a run at a step
boundary, with that step checkpointed, instead of killing it where it stands.

    with preemption.Watch() as watch:
      ... loop, calling watch.reached(step) after every step ...

One process: a signal handler notes the signal; `reached(step)` is then true at the next
step boundary, and the run saves, seals and exits with status 128 + the signal's number
(143 after SIGTERM, 130 after SIGINT: `Preempted.exit_status`). A repeated SIGTERM changes
nothing; a second SIGINT (Ctrl-C again) is not caught, and interrupts the run where it is.

Several processes: JAX's preemption service (on by default with `jax.distributed`) receives
the SIGTERM of any host and agrees with the others on a step past every host's current
one; `reached(step)` is `multihost_utils.reached_preemption_sync_point(step)`, true on every
host at that same step, as in t5x. (SIGINT there is left to Python: it ends that process.)
"""
import signal
import threading
from typing import Optional

import jax
from jax.experimental import multihost_utils

SIGNALS = (signal.SIGTERM, signal.SIGINT)


class Preempted(Exception):
  """A run stopped for a signal after checkpointing `step`."""

  def __init__(self, step: int, signum: int = signal.SIGTERM, where: str = ""):
    self.step, self.signum = step, signum
    name = signal.Signals(signum).name
    super().__init__(f"Stopped by {name} after step {step}, which is saved{where}; run the "
                     "same command again to resume from it.")

  @property
  def exit_status(self) -> int:
    return 128 + self.signum


class Watch:
  """Notes SIGTERM / SIGINT while a run trains (see the module docstring)."""

  def __init__(self):
    self.signum: Optional[int] = None
    self._previous = {}
    self._answered: tuple[int, bool] | None = None  # (step, answer): asked once per step

  @property
  def multi_process(self) -> bool:
    return jax.process_count() > 1

  def __enter__(self) -> "Watch":
    if not self.multi_process and threading.current_thread() is threading.main_thread():
      for signum in SIGNALS:
        self._previous[signum] = signal.signal(signum, self._note)
    return self

  def _note(self, signum, frame) -> None:
    del frame
    self.signum = self.signum or signum
    if signal.SIGINT in self._previous:  # a second Ctrl-C is not caught: it interrupts
      signal.signal(signal.SIGINT, self._previous.pop(signal.SIGINT))

  def __exit__(self, *exc) -> None:
    for signum, previous in self._previous.items():
      signal.signal(signum, previous)
    self._previous = {}

  def reached(self, step: int) -> bool:
    """Whether the run stops after `step` (call it after every step; asking again about
    the same step gives the same answer)."""
    if self._answered is None or self._answered[0] != step:
      if self.multi_process and multihost_utils.reached_preemption_sync_point(step):
        self.signum = signal.SIGTERM
      self._answered = (step, self.signum is not None)
    return self._answered[1]
