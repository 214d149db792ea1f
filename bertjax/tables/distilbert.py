"""DistilBERT (Sanh et al., 2019): a BERT teacher pretrained here, distilled into a student of
half its depth with the triple loss, and the paper's ablations (its Table 4).

  corpus -> pretrain/teacher                      BERT layout, masked LM (roberta_mlm data)
         -> init/every_other_layer, init/random   bertjax.tools.distilbert_init
         -> pretrain/<student>                    StudentTeacher run of DistilBertLoss
         -> finetune/<arm>/<task>/seed<n>         teacher and every student, same tasks
         -> speed                                 teacher vs student classifiers, in turns

The student (`gin/models/distilbert_base.gin`, `objectives/distilbert_distill.gin`,
`runs/distilbert_pretrain.gin`) starts from one teacher layer out of two (embeddings and
MLM head copied), or at random for that ablation; each loss ablation zeroes one of
DistilBertLoss's weights (5 L_ce + 2 L_mlm + 1 L_cos, T = 2). The teacher is the scale's
model with twice a student's layers (4 x 128 at CPU scale, BERT-base at the paper's); the
student's size is bound in its own gin scope (`student/build_model.config_overrides`).
The extra report section gives the student's share of the teacher's scores, the
ablations' differences from the full student, and the parameter ratio and speed-up
measured side by side (`bertjax.distill.pair_speed`).
"""
import dataclasses
import json
import os

from bertjax.checkpoints import params as params_lib
from bertjax.tables import grid, report, scales
from bertjax.tables.bert import MRPC, RTE, SST2
from bertjax.tables.spec import Arm, Scale, Table

TEACHER = Arm("teacher", "BERT teacher",
              ("models/bert_base.gin", "models/bert_mlm.gin", "objectives/roberta_mlm.gin"),
              note=("BertForMaskedLM, masked LM on FULL-SENTENCES with dynamic masks (the "
                    "data the students are distilled on)"))
STUDENT_FILES = ("runs/distilbert_pretrain.gin", "models/distilbert_base.gin",
                 "objectives/distilbert_distill.gin")
INITS = ("every_other_layer", "random")  # the init/<name> cells


def init_dir(out: str, init: str) -> str:
  return os.path.join(out, "init", init)


# The init/<name> cell each student arm starts from.
STUDENT_INIT = {"distilbert": "every_other_layer", "no_ce": "every_other_layer",
                "no_mlm": "every_other_layer", "no_cos": "every_other_layer",
                "random_init": "random"}


def _student(name: str, label: str, bindings: tuple[str, ...] = (), note: str = "") -> Arm:
  return Arm(name, label, STUDENT_FILES,
             (f"DISTILLATION_INIT = '{init_dir('{out}', STUDENT_INIT[name])}'",) + bindings,
             after=(TEACHER.name,), note=note)


STUDENTS = (
    _student("distilbert", "DistilBERT (triple loss, teacher init)",
             note="L = 5 L_ce + 2 L_mlm + 1 L_cos from teacher layers 0, 2, ..."),
    _student("no_ce", "- L_ce", ("DistilBertLoss.alpha_ce = 0.0",)),
    _student("no_mlm", "- L_mlm", ("DistilBertLoss.alpha_mlm = 0.0",)),
    _student("no_cos", "- L_cos", ("DistilBertLoss.alpha_cos = 0.0",)),
    _student("random_init", "random init",
             note="the triple loss from a randomly drawn student"),
)


def student_init(arm: Arm) -> str:
  """The init/<name> cell a student arm starts from."""
  if arm.name not in STUDENT_INIT:
    raise ValueError(f"Arm {arm.name!r} is not a student of {sorted(STUDENT_INIT)}.")
  return STUDENT_INIT[arm.name]


# Distillation steps per scale (the teacher takes the scale's pretraining steps), with 10%
# warmup to the shared CPU recipe's peak rate (ELECTRA-Small's, 5e-4): the students start from
# the teacher's trained layers, and the MLM recipe's 4x rate, chosen for pretraining from
# scratch, is not theirs. At the paper's scale runs/distilbert_pretrain.gin's own run stands.
STUDENT_STEPS = {"tiny": 2, "cpu": 150, "gpu": 150}
STUDENT_PEAK_RATE = 5e-4


def student_bindings(scale: Scale) -> list[str]:
  """The student's own size (the scale's model at half its layers, rounded up) and
  distillation steps. At the paper's scale the gin files' sizes stand (BERT-base teacher,
  DistilBERT-base student)."""
  if not scale.runnable:
    return []
  student = {**scale.model, "num_layers": (scale.model["num_layers"] + 1) // 2}
  steps = STUDENT_STEPS[scale.name]
  return [f"student/build_model.config_overrides = {student!r}",
          f"Trainer.num_train_steps = {steps}",
          f"warmup_linear_decay.peak_value = {STUDENT_PEAK_RATE}",
          f"warmup_linear_decay.warmup_steps = {max(1, steps // 10)}"]


# Flags of the side-by-side speed measurement at each scale (same batch, same length).
SPEED_FLAGS = {"tiny": ("--max_examples=16", "--batch_size=8", "--repeats=1"),
               "cpu": ("--max_examples=512", "--batch_size=32", "--repeats=5"),
               "gpu": ("--max_examples=2048", "--batch_size=128", "--repeats=5")}


def init_cell(out: str, init: str) -> grid.Cell:
  directory = init_dir(out, init)
  command = ("python", "-m", "bertjax.tools.distilbert_init",
             f"--teacher={grid.arm_dir(out, TEACHER)}", f"--out={directory}")
  command += ("--random_student",) if init == "random" else ()
  return grid.Cell(f"init/{init}", "init", directory, command,
                   needs=(f"pretrain/{TEACHER.name}",), fresh=True)


def speed_cell(table: Table, scale: Scale, out: str) -> grid.Cell:
  """Teacher vs the full student, fine-tuned on the scale's first task (seed of the first)."""
  task, seed = table.tasks_at(scale)[0], scale.seeds[0]
  runs = [c.directory for c in (grid.finetune_cell(scale, arm, task, seed, out)
                                for arm in (TEACHER, STUDENTS[0]))]
  directory = os.path.join(out, "speed")
  command = ("python", "-m", "bertjax.distill.pair_speed", f"--teacher={runs[0]}",
             f"--student={runs[1]}", f"--out={os.path.join(directory, grid.SPEED_FILE)}",
             *SPEED_FLAGS[scale.name])
  needs = tuple(f"finetune/{arm.name}/{task.name}/seed{seed}" for arm in (TEACHER, STUDENTS[0]))
  return grid.Cell("speed", "speed", directory, command, task=task.name, needs=needs,
                   fresh=True)


def cells(table: Table, scale: Scale, out: str) -> list[grid.Cell]:
  """corpus, teacher, both inits, every student (after its init), every arm fine-tuned,
  then the speed comparison."""
  corpus = grid.corpus_cell(scale, out)
  corpus_dir = corpus.directory if corpus else None
  arms = table.arms_at(scale)
  if arms[:2] != (TEACHER, STUDENTS[0]):
    raise ValueError(f"Every scale of {table.name!r} runs the teacher and the full student "
                     f"(the speed comparison's pair), not only {[a.name for a in arms]}.")
  result = ([corpus] if corpus else []) + [grid.pretrain_cell(scale, TEACHER, out, corpus_dir)]
  result += [init_cell(out, init) for init in INITS
             if any(student_init(arm) == init for arm in arms[1:])]
  for arm in arms[1:]:
    sized = dataclasses.replace(arm, bindings=tuple(student_bindings(scale)) + arm.bindings)
    cell = grid.pretrain_cell(scale, sized, out, corpus_dir)
    result.append(dataclasses.replace(cell, needs=cell.needs + (f"init/{student_init(arm)}",)))
  result += [grid.finetune_cell(scale, arm, task, seed, out)
             for arm in arms for task in table.tasks_at(scale) for seed in scale.seeds]
  return result + [speed_cell(table, scale, out)]


def init_record(directory: str) -> dict:
  with open(os.path.join(directory, params_lib.METADATA_FILE)) as f:
    metadata = json.load(f)
  return {"teacher_layers": metadata["teacher_layers"],
          "student_layers": metadata["student_config"]["num_layers"]}


grid.RECORDS["init"] = init_record


# ------------------------------------------------------------------------ report
# Sanh et al. (2019), Table 4 (as we read it): GLUE macro-score change of each ablation from the triple
# loss with the teacher's layers as initialisation.
PAPER_DELTA = {"no_ce": "-2.96", "no_mlm": "-0.31", "no_cos": "-1.46", "random_init": "-3.69"}

def _macro(tasks, cells_, arm: str) -> float | None:
  """The mean over tasks of the arm's mean score (None until every task has one)."""
  means = [report.scores(cells_, arm, t, t.metric) for t in tasks]
  if not all(means):
    return None
  return sum(report.mean_std(m)[0] for m in means) / len(means)


def _num(value, fmt: str = ".1f") -> str:
  return "-" if value is None else format(value, fmt)


def report_section(table: Table, scale: Scale, cells_: list[grid.Cell]) -> list[str]:
  tasks = table.tasks_at(scale)
  teacher = _macro(tasks, cells_, TEACHER.name)
  lines = ["## DistilBERT: the student against its teacher", "",
           "Share of the teacher's score (mean over seeds; macro = mean over tasks); "
           "the paper: 97% of BERT-base's GLUE macro-score (77.0 vs 79.5).", "",
           "| arm | " + " | ".join(t.label for t in tasks) + " | macro | share of teacher |"
           " Δ macro vs DistilBERT | paper's Δ |",
           "|---|" + "---:|" * (len(tasks) + 4)]
  full = _macro(tasks, cells_, STUDENTS[0].name)
  for arm in table.arms_at(scale):
    means = [report.scores(cells_, arm.name, t, t.metric) for t in tasks]
    macro = _macro(tasks, cells_, arm.name)
    share = 100 * macro / teacher if macro is not None and teacher else None
    delta = macro - full if arm in STUDENTS[1:] and macro is not None and full else None
    lines.append(f"| {arm.label} | " + " | ".join(
        _num(report.mean_std(m)[0]) if m else "-" for m in means)
        + f" | {_num(macro)} | {_num(share)}{'%' if share else ''} | {_num(delta, '+.2f')} | "
        f"{PAPER_DELTA.get(arm.name, '')} |")
  lines += ["", "Each ablation against the full student, per task (± standard error of the "
            "difference):", "", "| arm | " + " | ".join(t.label for t in tasks) + " |",
            "|---|" + "---:|" * len(tasks)]
  for arm in table.arms_at(scale)[2:]:
    lines.append(f"| {arm.label} | " + " | ".join(report.versus(
        report.scores(cells_, STUDENTS[0].name, t, t.metric),
        report.scores(cells_, arm.name, t, t.metric)) for t in tasks) + " |")
  return lines + [""] + _speed_lines(cells_)


def _speed_lines(cells_: list[grid.Cell]) -> list[str]:
  cell = next((c for c in cells_ if c.kind == "speed"), None)
  rec = cell.record() if cell else None
  lines = ["### Size and inference speed", "",
           "The paper (its Table 3): 66M vs 110M parameters (40% fewer), inference 60% faster "
           "(410 s vs 668 s for STS-B's dev set on CPU, batch size 1)."]
  if rec is None:
    return lines + ["", "Not measured yet (the `speed` cell)."]
  lines += ["", f"Measured here (`bertjax.distill.pair_speed`): the two {rec['task']} "
            f"classifiers on the same {rec['sentences']} {rec['split']} sentences, batches of "
            f"{rec['batch_size']} trimmed to the same lengths, in turns, median of "
            f"{rec['repeats']} passes each, on {rec['devices']}.", "",
            "| model | layers | parameters | without embeddings | sentences/s |",
            "|---|---:|---:|---:|---:|"]
  for name in ("teacher", "student"):
    m = rec[name]
    lines.append(f"| {name} | {m['layers']} | {m['params']:,} | "
                 f"{m['params_without_embeddings']:,} | {m['sentences_per_s']:.1f} |")
  return lines + ["", f"Student / teacher parameters: {100 * rec['params_ratio']:.0f}% "
                  f"({100 * rec['params_ratio_without_embeddings']:.0f}% without the "
                  f"embeddings); speed-up {rec['speedup']:.2f}x "
                  f"({100 * (rec['speedup'] - 1):.0f}% faster)."]


TEACHER_LAYERS = {"tiny": 2, "cpu": 4}

TABLE = Table(
    name="distilbert", paper="distilbert",
    title="DistilBERT: a half-depth student distilled with the triple loss, and its ablations",
    direction=("DistilBERT keeps 97% of BERT-base's GLUE score (77.0 vs 79.5) with 40% fewer "
               "parameters and 60% faster inference; removing L_ce (-2.96 GLUE points) or "
               "initialising at random (-3.69) hurts most, L_cos helps (-1.46 without), "
               "L_mlm matters little (-0.31)."),
    arms=(TEACHER,) + STUDENTS,
    tasks=(SST2, MRPC, RTE),
    scales={
        # Tests: the teacher, the full student and the random-init student (each kind of
        # cell once); every arm's config is parsed at the cpu scale too.
        "tiny": dataclasses.replace(
            scales.tiny(("sst2",), arms=("teacher", "distilbert", "random_init")),
            model={**scales.TINY_MODEL, "num_layers": TEACHER_LAYERS["tiny"]}),
        # The teacher on the MLM recipe (scales.cpu_mlm), twice the layers of the students.
        # RTE stays near chance at this size, so it is left to the paper's scale.
        "cpu": dataclasses.replace(scales.cpu_mlm(tasks=("sst2", "mrpc"), seeds=(0, 1, 2)),
                                   model={**scales.CPU_MODEL,
                                          "num_layers": TEACHER_LAYERS["cpu"]}),
        "gpu": scales.gpu(dataclasses.replace(
            scales.cpu_mlm(tasks=("sst2", "mrpc"), seeds=(0, 1, 2)),
            model={**scales.CPU_MODEL, "num_layers": TEACHER_LAYERS["cpu"]})),
        # BERT-base teacher (runs/pretrain.gin), DistilBERT-base students
        # (runs/distilbert_pretrain.gin: 4k x 512 batches).
        "paper": scales.paper({}, {}),
    },
    notes=("The teacher pretrains for the scale's steps (3,000 at CPU scale, the MLM recipe: "
           "peak rate 2e-3, MLM head at 20 positions); each student distils for fewer "
           "(`STUDENT_STEPS`: 150 at CPU scale, 10% warmup to 5e-4) from the teacher's last "
           "step, so the pretraining rows' steps differ by design. 150 steps leave the "
           "random-init student barely trained (at CPU scale its held-out MLM loss stays "
           "near the unigram's), where the paper's distils as long as the others.",
           "The student keeps the teacher's width and vocabulary; its token-type row 0 is "
           "folded into the position table (DistilBERT has no token types).",
           "The paper's teacher is BERT-base trained by Google; here the teacher is "
           "pretrained here, on the corpus the students are then distilled on.",
           "GLUE's other tasks are not in the shared data: SST-2, MRPC and RTE stand in for "
           "its macro-score."),
    cells=cells, report=report_section,
)
