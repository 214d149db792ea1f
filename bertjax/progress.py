"""The progress bar of every long job: training and fine-tuning steps, a distillation's
teacher scoring, a table's cells.

A tqdm bar on stderr that moves as work finishes (`advance`: never when it is only
dispatched), so its rate and ETA are those of finished work. `phase(name)` names what runs
between the counted units (compiling, evaluating, writing a checkpoint) and keeps its time
out of the rate; `running(text)` names what runs alongside them (a table's cells);
`above()` lets other output print above the bar, which is then drawn again. `show=None`
shows the bar when stderr is a terminal (not in a log file). No JAX here: a table's
runner shows its bar without taking the accelerator its cells need.
"""
import contextlib
import sys
from typing import Mapping


class Progress:
  """A bar over `total` units (`initial` of them already done)."""

  def __init__(self, total: int, initial: int = 0, desc: str = "", unit: str = "step",
               show: bool | None = None):
    self._desc = desc
    self._bar = None
    if show is None:
      show = sys.stderr.isatty()
    if show:
      import tqdm  # Local: only a shown bar needs it.
      self._bar = tqdm.tqdm(total=total, initial=initial, desc=desc, unit=unit,
                            dynamic_ncols=True, smoothing=0.1, file=sys.stderr)

  @property
  def shown(self) -> bool:
    return self._bar is not None

  @property
  def done(self) -> int:
    """Units finished so far (0 without a bar)."""
    return 0 if self._bar is None else self._bar.n

  def advance(self, done: int, postfix: Mapping[str, float] | None = None) -> None:
    """Moves the bar to `done` units finished (its ETA comes from their rate)."""
    if self._bar is None or done < self._bar.n:
      return
    self._bar.update(done - self._bar.n)
    if postfix:
      self._bar.set_postfix({k: f"{v:.4g}" for k, v in postfix.items()}, refresh=False)

  def running(self, text: str | None) -> None:
    """Names what runs now beside the description ("train (evaluating)"); None: nothing."""
    if self._bar is not None:
      self._bar.set_description_str(f"{self._desc} ({text})" if text else self._desc,
                                    refresh=True)

  @contextlib.contextmanager
  def phase(self, name: str):
    """Names what runs meanwhile on the bar; its time is left out of the bar's rate and
    ETA. Without a bar it does nothing."""
    if self._bar is None:
      yield
      return
    self.running(name)
    try:
      yield
    finally:
      self._bar.set_description_str(self._desc, refresh=False)
      self._bar.unpause()  # the next unit's rate starts now

  @contextlib.contextmanager
  def above(self):
    """Output printed meanwhile (to stdout or stderr) goes above the bar."""
    if self._bar is None:
      yield
      return
    with type(self._bar).external_write_mode():
      yield

  def print(self, message: str) -> None:
    with self.above():
      print(message, flush=True)

  def close(self) -> None:
    if self._bar is not None:
      self._bar.close()

  def __enter__(self) -> "Progress":
    return self

  def __exit__(self, *exc) -> None:
    self.close()
