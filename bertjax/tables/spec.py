"""A paper table as data: arms pretrained under equal compute, fine-tuned on tasks x seeds.

  Table(arms=(Arm(...), ...), tasks=(Task(...), ...), scales={'tiny': ..., 'cpu': ...,
        'paper': ...})

An `Arm` is what differs between the rows: gin files (model, objective) and bindings on
top of its scale's run. A `Scale` is how big everything is: the model's size overrides,
the pretraining run (steps, batch, length, run gin), the corpus, the fine-tuning flags
of each task and the seeds. `cells(table, scale, out)` (bertjax.tables.grid) turns the
two into commands.
"""
import dataclasses
from typing import Callable, Mapping, Optional


@dataclasses.dataclass(frozen=True)
class Arm:
  """One row of a table.

  gin_files: model and objective files (under gin/), after the scale's run file.
  bindings: gin bindings after the scale's (e.g. an objective's variant).
  finetune_flags: flags of every fine-tuning run of this arm (e.g. its pooling).
  model_overrides: config fields merged over the scale's model sizes (e.g. ELECTRA's
    generator fraction); `None` values drop a scale field the arm's config lacks.
  after: arms whose pretraining must finish before this one's (a distilled student's
    teacher); '{out}' in bindings and finetune_flags is the table's output folder.
  """
  name: str
  label: str
  gin_files: tuple[str, ...]
  bindings: tuple[str, ...] = ()
  finetune_flags: tuple[str, ...] = ()
  model_overrides: Mapping[str, object] = dataclasses.field(default_factory=dict)
  after: tuple[str, ...] = ()
  note: str = ""


@dataclasses.dataclass(frozen=True)
class Task:
  """A downstream task: `finetune.run --task=name`, scored by `metric`, a '/'-path into
  its results.json (e.g. 'dev/accuracy'); `extra` metrics are reported beside it."""
  name: str
  label: str
  metric: str
  extra: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True)
class Scale:
  """How big a table runs.

  model: config overrides of every arm's model (sizes, vocab_size).
  pretrain: Trainer bindings (num_train_steps, batch_size, sequence_length, ...).
  bindings: further gin bindings of every pretraining run (e.g. its learning rate).
  run_gin: the run file every arm starts from.
  corpus: 'cpu' / 'tiny' (bertjax.tables.corpus), or None: the gin files' own data.
  vocabulary: the corpus's vocabulary, 'wordpiece' or 'sentencepiece' (T5's, sentinels).
  finetune: flags of every fine-tuning run; per_task: more flags per task name.
  tasks: task names run at this scale (None: all of the table's).
  arms: arm names run at this scale (None: all; e.g. one arm at the tiny scale).
  seeds: fine-tuning seeds.
  runnable: False for the paper's scale (its gin is written and parsed, not run here).
  departure: how this scale's models differ from the paper's, one line in the results.
  """
  name: str
  model: Mapping[str, object]
  pretrain: Mapping[str, object]
  finetune: tuple[str, ...]
  per_task: Mapping[str, tuple[str, ...]] = dataclasses.field(default_factory=dict)
  bindings: tuple[str, ...] = ()
  run_gin: str = "runs/pretrain.gin"
  corpus: Optional[str] = "cpu"
  vocabulary: str = "wordpiece"
  tasks: Optional[tuple[str, ...]] = None
  arms: Optional[tuple[str, ...]] = None
  seeds: tuple[int, ...] = (0, 1, 2)
  runnable: bool = True
  departure: str = ""


@dataclasses.dataclass(frozen=True)
class Table:
  """A paper's table: `direction` says what the paper found, in one sentence.

  cells: `(table, scale, out) -> [grid.Cell]` for a table whose cells are not the usual
    corpus -> pretrain every arm -> fine-tune every arm x task x seed
    (`grid.pretrain_then_finetune`, the default).
  report: `(table, scale, cells) -> [markdown lines]`, sections added to results.md
    (e.g. measured speed and parameter counts).
  plot: `(table, scale_name, cells, path) -> path or None`, the table's figure instead of
    grouped bars of every arm x task (`report.plot_scores`, the default).
  folder: the name of the folder its runnable scales run in (default: the table's name).
    Tables of one paper that name the same folder share their cells: a cell of the same
    key is one run, made once for all of them (the ELECTRA figures' common ELECTRA and
    BERT runs). Their cells of one key must have one command, which tests check and the
    runner's recipe check enforces.
  """
  name: str
  paper: str
  title: str
  direction: str
  arms: tuple[Arm, ...]
  tasks: tuple[Task, ...]
  scales: Mapping[str, Scale]
  notes: tuple[str, ...] = ()
  cells: Optional[Callable[..., list]] = None
  report: Optional[Callable[..., list[str]]] = None
  plot: Optional[Callable[..., Optional[str]]] = None
  folder: str = ""

  def scale(self, name: str) -> Scale:
    if name not in self.scales:
      raise ValueError(f"Table {self.name!r} has no scale {name!r}; "
                       f"choose one of {sorted(self.scales)}.")
    return self.scales[name]

  def tasks_at(self, scale: Scale) -> tuple[Task, ...]:
    if scale.tasks is None:
      return self.tasks
    return tuple(t for t in self.tasks if t.name in scale.tasks)

  def arms_at(self, scale: Scale) -> tuple[Arm, ...]:
    if scale.arms is None:
      return self.arms
    return tuple(a for a in self.arms if a.name in scale.arms)

  def arm(self, name: str) -> Arm:
    for arm in self.arms:
      if arm.name == name:
        return arm
    raise ValueError(f"Table {self.name!r} has no arm {name!r}: {[a.name for a in self.arms]}.")
