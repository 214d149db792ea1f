"""ELECTRA (Clark et al., 2020): where its efficiency comes from (Table 5), how large the
generator should be (Figure 3, left) and downstream score against pretraining compute
(Figure 3 right / Figure 1).

Every arm is ELECTRA-Small's architecture sized by the scale (at CPU scale the discriminator
is 128 wide, 2 layers, embeddings as wide as it), on ELECTRA's data: segment pairs without
NSP, 15% of the tokens selected, 85% of those shown as [MASK] (the `electra` recipe). The
BERT rows are the same encoder trained as a masked LM (ElectraForMaskedLM) on the same data
and masks, so only the objective differs. Fine-tuning reads the discriminator (ELECTRA),
the MLM network (Replace / All-Tokens MLM) or the encoder (BERT).

The learning curve fine-tunes each arm's checkpoints nearest 1/6 and 1/2 of its steps and
its final model (`grid.finetune_cell(step=...)`); a checkpoint's FLOPs are the trainer's
analytic count per token x the tokens seen by that step.

The three tables run in one folder (Table.folder = FOLDER) on one pretraining recipe, which
keeps every checkpoint: Table 5's ELECTRA and BERT runs are the learning curve's, and its
ELECTRA is the generator sweep's 1/4, so each is pretrained and fine-tuned once for all three
(as in the paper, whose figures share their runs).
"""
import dataclasses
import math

from bertjax.tables import grid, report, scales
from bertjax.tables.bert import MRPC, RTE, SST2
from bertjax.tables.spec import Arm, Scale, Table

_SMALL = "models/electra_small.gin"
_ELECTRA_DATA = "Trainer.train_task = 'electra'"

ELECTRA = Arm("electra", "ELECTRA", (_SMALL, "objectives/electra.gin"))
ALL_TOKENS = Arm("all_tokens_mlm", "All-Tokens MLM",
                 (_SMALL, "models/electra_all_tokens_mlm.gin",
                  "objectives/electra_all_tokens_mlm.gin"),
                 note=("generator samples in the masked positions, the original token "
                       "predicted at every position through the paper's copy mechanism"))
REPLACE = Arm("replace_mlm", "Replace MLM",
              (_SMALL, "models/electra_replace_mlm.gin", "objectives/electra_replace_mlm.gin"),
              note="generator samples instead of [MASK], MLM loss on those positions")
ELECTRA_15 = Arm("electra_15", "ELECTRA 15%", (_SMALL, "objectives/electra_15.gin"),
                 note="the discriminator scored on the masked positions only")
BERT = Arm("bert", "BERT (MLM)", (_SMALL, "models/electra_mlm.gin", "objectives/mlm.gin"),
           (_ELECTRA_DATA,),
           note="the discriminator's encoder as a masked LM (ElectraForMaskedLM), same data")

FOLDER = "electra"
# Embeddings as wide as the encoder at the small scales (ELECTRA-Small's config has 128), the
# generator ELECTRA-Small's 1/4 of it, named so that the sweep's 1/4 arm is Table 5's ELECTRA.
_TINY_MODEL = {**scales.TINY_MODEL, "embedding_size": scales.TINY_MODEL["hidden_size"],
               "generator_fraction": 1 / 4}
_CPU_MODEL = {**scales.CPU_MODEL, "embedding_size": scales.CPU_MODEL["hidden_size"],
              "generator_fraction": 1 / 4}
# ELECTRA-Base (the paper's Table 6 and 7): 768 wide, 12 layers, generator 1/3, batch 256 x
# 512 tokens, 766k steps at a peak rate of 2e-4 after 10k warmup steps.
_BASE_MODEL = {"embedding_size": 768, "hidden_size": 768, "num_layers": 12, "num_heads": 12,
               "intermediate_size": 3072, "generator_fraction": 1 / 3, "vocab_size": 30522}
_BASE_RUN = {"num_train_steps": 766000, "batch_size": 256, "sequence_length": 512}
_BASE_OPTIMIZER = ("warmup_linear_decay.peak_value = 2e-4",
                   "warmup_linear_decay.warmup_steps = 10000")

# Every pretraining keeps all its checkpoints: the learning curve fine-tunes some of them.
_KEEP_EVERY_CHECKPOINT = {"tiny": {"checkpoint_every": 1, "keep_checkpoints": 2},
                          "cpu": {"checkpoint_every": 1000, "keep_checkpoints": 6}}


def _scales(paper_run: dict, tiny_arms: tuple[str, ...]) -> dict[str, Scale]:
  """tiny / cpu / gpu / paper scales of these tables: one model and pretraining recipe at each
  runnable scale (the heads at 20 masked positions at both), SST-2 with 3 seeds at CPU scale
  (`tiny_arms`: the arms the tests train, every arm's config being parsed anyway)."""
  tiny = scales.tiny(("sst2",), arms=tiny_arms)
  cpu = scales.cpu_electra(tasks=("sst2",), seeds=(0, 1, 2))
  cpu_scale = dataclasses.replace(cpu, model=_CPU_MODEL, pretrain={
      **cpu.pretrain, **_KEEP_EVERY_CHECKPOINT["cpu"]})
  return {
      "tiny": dataclasses.replace(tiny, model=_TINY_MODEL, bindings=scales.ELECTRA_HEADS_AT_20,
                                  pretrain={**tiny.pretrain, **_KEEP_EVERY_CHECKPOINT["tiny"]}),
      "cpu": cpu_scale,
      "gpu": scales.gpu(cpu_scale),
      "paper": scales.paper(_BASE_MODEL, paper_run, bindings=_BASE_OPTIMIZER)}


_TASKS_NOTE = ("GLUE is the paper's score; SST-2 (3 seeds) stands in at CPU scale, to fit two "
               "hours. MRPC and RTE stay at their majority class with encoders this small "
               "(BERT Table 5 here: MRPC F1 81.6 ± 0.3 against the majority's 81.2, RTE "
               "52.7 ± 0.0), so they would not tell the arms apart; the tables keep them for "
               "the paper's scale.")

TABLE5 = Table(
    name="electra_table5", paper="electra",
    title="ELECTRA Table 5: where ELECTRA's efficiency comes from",
    direction=("GLUE score, base-sized models on the same data and steps: ELECTRA 85.0 > "
               "All-Tokens MLM 84.3 > Replace MLM 82.4 = ELECTRA 15% 82.4 > BERT 82.2: most of "
               "the gain comes from learning from all tokens, a little from not showing "
               "[MASK] in pretraining."),
    arms=(ELECTRA, ALL_TOKENS, REPLACE, ELECTRA_15, BERT),
    tasks=(SST2, MRPC, RTE),
    scales=_scales(_BASE_RUN, tiny_arms=("electra", "all_tokens_mlm", "replace_mlm")),
    folder=FOLDER,
    notes=(_TASKS_NOTE,
           "The generator is 1/4 of the discriminator's width at the tiny and CPU scales "
           "(ELECTRA-Small's), 1/3 at the paper's (ELECTRA-Base's). Replace and All-Tokens "
           "MLM add the network's MLM loss to the generator's with weight 1 (both are "
           "cross-entropies); ELECTRA weighs its binary loss by 50.",
           "FLOPs (bertjax/train/flops.py) count every dense kernel of the model and each "
           "vocabulary projection where it runs: at the 20 masked positions a sequence "
           "(the generators', BERT's and Replace MLM's heads), at every position for "
           "All-Tokens MLM's network.",
           "Its ELECTRA and BERT runs are also the learning curve's, and its ELECTRA the "
           "generator sweep's 1/4: the three tables share their folder and those cells."),
)

# ------------------------------------------------------------- Figure 3 (left)
FRACTIONS = ((1, 4), (1, 2), (3, 4), (1, 1))


def _generator_arm(numerator: int, denominator: int) -> Arm:
  """The sweep's arm of that fraction; at 1/4 (the scales' own) it is Table 5's ELECTRA
  run, under ELECTRA's name, so the two tables share it."""
  fraction = numerator / denominator
  label = f"generator {numerator}/{denominator}" if fraction < 1 else "generator 1 (same size)"
  note = f"generator {round(_CPU_MODEL['hidden_size'] * fraction)} wide at CPU scale"
  overrides = {"generator_fraction": fraction}
  if fraction == _CPU_MODEL["generator_fraction"]:
    return dataclasses.replace(ELECTRA, label=label, model_overrides=overrides,
                               note=note + " (Table 5's ELECTRA run)")
  return Arm(f"generator_{numerator}_{denominator}", label, ELECTRA.gin_files,
             model_overrides=overrides, note=note)


GENERATOR_SIZE = Table(
    name="electra_generator_size", paper="electra",
    title="ELECTRA Figure 3 (left): the generator's size",
    direction=("For a fixed discriminator, generators 1/4 to 1/2 of its size work best (GLUE "
               "falls off for larger ones, which pose too hard a task, and for a unigram "
               "generator)."),
    arms=tuple(_generator_arm(n, d) for n, d in FRACTIONS),
    tasks=(SST2, MRPC, RTE),
    scales=_scales({**_BASE_RUN, "num_train_steps": 500000},
                   tiny_arms=("electra", "generator_1_1")),
    folder=FOLDER,
    notes=(_TASKS_NOTE,
           "The paper sweeps three discriminator sizes (256, 512, 768) for 500k steps; here "
           "one (the scale's), with the same steps for every generator, so larger "
           "generators cost more FLOPs (reported below).",
           "At CPU scale the generator keeps 1 attention head up to 1/2 and 2 from 3/4 "
           "(heads = round(2 x fraction), at least 1).",
           "Its 1/4 arm is ELECTRA Table 5's ELECTRA run, pretrained and fine-tuned once for "
           "both (the tables share their folder)."),
)

# ------------------------------------------------------------- Figure 3 (right)
CURVE_FRACTIONS = (1 / 6, 1 / 2, 1)


def curve_steps(scale: Scale) -> list[int]:
  """The pretraining steps whose checkpoints are fine-tuned: the saved ones
  (`checkpoint_every`) nearest CURVE_FRACTIONS of the run, which must keep all it saves."""
  total, every = scale.pretrain["num_train_steps"], scale.pretrain["checkpoint_every"]
  kept = scale.pretrain.get("keep_checkpoints", 0)
  if kept < total // every:
    raise ValueError(f"Scale {scale.name!r} saves every {every} steps and keeps {kept}: the "
                     f"learning curve fine-tunes several of them; bind keep_checkpoints >= "
                     f"{total // every}.")
  return sorted({min(total, every * max(1, round(total * f / every))) for f in CURVE_FRACTIONS})


def curve_cells(table: Table, scale: Scale, out: str) -> list[grid.Cell]:
  """The corpus, each arm pretrained, then fine-tuned from each checkpoint of
  `curve_steps` (the last one is the final model: a plain fine-tuning cell)."""
  corpus = grid.corpus_cell(scale, out)
  result = [corpus] + [grid.pretrain_cell(scale, arm, out, corpus.directory)
                       for arm in table.arms]
  last = scale.pretrain["num_train_steps"]
  for arm in table.arms:
    for step in curve_steps(scale):
      result += [grid.finetune_cell(scale, arm, task, seed, out,
                                    step=None if step == last else step)
                 for task in table.tasks_at(scale) for seed in scale.seeds]
  return result


def curve_points(table: Table, scale: Scale, cells: list[grid.Cell], arm: Arm, task):
  """[(step, FLOPs or None, scores)] of one arm on one task along its pretraining."""
  pretrain = next(c for c in cells if c.key == f"pretrain/{arm.name}").record()
  last = scale.pretrain["num_train_steps"]
  points = []
  for step in curve_steps(scale):
    flops = None
    if pretrain and pretrain.get("flops"):
      flops = pretrain["flops"] * step / pretrain["steps"]
    points.append((step, flops, report.scores(cells, arm.name, task, task.metric,
                                              None if step == last else step)))
  return points


def curve_report(table: Table, scale: Scale, cells: list[grid.Cell]) -> list[str]:
  tasks = table.tasks_at(scale)
  lines = ["## Learning curve: score against pretraining FLOPs", "",
           "| arm | step | FLOPs | " + " | ".join(t.label for t in tasks) + " |",
           "|---|---:|---:|" + "---:|" * len(tasks)]
  for arm in table.arms:
    by_task = [curve_points(table, scale, cells, arm, t) for t in tasks]
    for i, (step, flops, _) in enumerate(by_task[0]):
      lines.append(f"| {arm.label} | {step} | {f'{flops:.3g}' if flops else '-'} | "
                   + " | ".join(report.format_scores(points[i][2]) for points in by_task)
                   + " |")
  return lines


def plot_curve(table: Table, scale_name: str, cells: list[grid.Cell], path: str):
  """Score (mean ± std over seeds) against pretraining FLOPs, one line per arm, one panel
  per task."""
  import matplotlib  # pylint: disable=g-import-not-at-top
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top
  scale = table.scale(scale_name)
  tasks = table.tasks_at(scale)
  width_inches = 3.4 * len(tasks)
  fig, axes = plt.subplots(1, len(tasks), figsize=(width_inches, 3.0), squeeze=False)
  drawn = False
  for ax, task in zip(axes[0], tasks):
    for arm in table.arms:
      done = [(f, report.mean_std(v)) for _, f, v in curve_points(table, scale, cells, arm, task)
              if f and v]
      if not done:
        continue
      drawn = True
      ax.errorbar([f for f, _ in done], [m for _, (m, _) in done],
                  yerr=[0.0 if math.isnan(s) else s for _, (_, s) in done], marker="o",
                  capsize=2, label=arm.label)
    ax.set_xscale("log")
    # A span under a decade gets labelled minor ticks, which overlap: only the decades.
    ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    ax.set_xlabel("pretraining FLOPs")
    ax.set_ylabel(task.label)
    ax.legend(fontsize=7)
  if not drawn:
    plt.close(fig)
    return None
  fig.suptitle(report.plot_title(table, scale_name, width_inches), fontsize=9)
  fig.tight_layout()
  fig.savefig(path, dpi=110)
  plt.close(fig)
  return path


LEARNING_CURVE = Table(
    name="electra_learning_curve", paper="electra",
    title="ELECTRA Figure 3 (right) / Figure 1: downstream score against pretraining FLOPs",
    direction=("At every compute budget ELECTRA scores above an equally sized BERT (MLM), "
               "and the gap is largest early: ELECTRA reaches BERT's score with a fraction of "
               "the FLOPs (GLUE dev, Figure 1)."),
    arms=(ELECTRA, BERT),
    tasks=(SST2, MRPC, RTE),
    scales={**_scales(_BASE_RUN, tiny_arms=None),
            "paper": scales.paper(_BASE_MODEL, {**_BASE_RUN, "checkpoint_every": 191500,
                                                "keep_checkpoints": 4},
                                  bindings=_BASE_OPTIMIZER)},
    notes=(_TASKS_NOTE,
           "Each arm is fine-tuned from its saved checkpoints nearest 1/6 and 1/2 of its "
           "pretraining steps (1,000 and 3,000 of 6,000 at CPU scale) and from its final model "
           "(a learning-rate schedule planned for the whole run: the early checkpoints are "
           "not those of a shorter run, as in the paper's curves).",
           "Its ELECTRA and BERT runs are Table 5's (the tables share their folder)."),
    cells=curve_cells, report=curve_report, plot=plot_curve, folder=FOLDER,
)
