"""A table's cells: what each one runs (one subprocess command) and what it leaves behind.

  corpus                         python -m bertjax.tables.corpus OUT/corpus SIZE
  pretrain/<arm>                 python -m bertjax.main --model_dir=OUT/<arm>/pretrain ...
  finetune/<arm>/<task>/seed<n>  python -m bertjax.finetune.run --checkpoint=... --seed=n
                                 (or, text to text, python -m bertjax.main with the arm's
                                 model initialised from its pretraining: kind t2t_finetune)
  finetune/<arm>/step<k>/<task>/seed<n>   the same from the arm's checkpoint of step k

A table may build other cells (Table.cells), e.g. `transfer` (a command that writes a
results.json, as fine-tuning does) or `speed` (a timing that writes `speed.json`,
bertjax.distill.speed).

A cell is done when its folder holds `cell.json` (MARKER): what the cell produced, read from
its folder by the record function of its kind (RECORDS: pretraining FLOPs and held-out
metrics; the task's scores). Running the cells, once and resumably, is runner.py's job.
"""
import dataclasses
import json
import os
from typing import Callable, Optional

from bertjax import paths
from bertjax.tables import corpus as corpus_lib
from bertjax.tables import word_order
from bertjax.tables.spec import Arm, Scale, Table, Task

MARKER = "cell.json"
# A pretraining's step folders: <model_dir>/checkpoints/<step> (bertjax.checkpoints.RUN_SUBDIR,
# named here so that the runner does not load JAX).
CHECKPOINTS = "checkpoints"
# Cells that time something: they run with no other cell beside them (runner.run's workers).
ALONE_KINDS = ("speed",)


@dataclasses.dataclass(frozen=True)
class Cell:
  key: str
  kind: str  # corpus | pretrain | finetune | t2t_finetune | transfer | speed | ...
  directory: str
  command: tuple[str, ...]
  arm: str = ""
  task: str = ""
  seed: int = -1
  needs: tuple[str, ...] = ()  # keys of cells that must be done first
  fresh: bool = False          # empty the folder before an attempt (fine-tuning)
  step: Optional[int] = None   # fine-tuning: the pretraining step (None: the final model)

  @property
  def alone(self) -> bool:
    return self.kind in ALONE_KINDS

  @property
  def marker(self) -> str:
    return os.path.join(self.directory, MARKER)

  def done(self) -> bool:
    return os.path.isfile(self.marker)

  def record(self) -> Optional[dict]:
    if not self.done():
      return None
    with open(self.marker) as f:
      return json.load(f)


def _python(module: str, *args: str) -> tuple[str, ...]:
  return ("python", "-m", module) + tuple(args)


def model_overrides(scale: Scale, arm: Arm) -> dict:
  merged = {**scale.model, **arm.model_overrides}
  return {k: v for k, v in merged.items() if v is not None}


def pretrain_bindings(scale: Scale, arm: Arm, corpus_dir: Optional[str]) -> list[str]:
  """Every gin binding of an arm's pretraining run, in order (later ones win)."""
  bindings = [f"build_model.config_overrides = {model_overrides(scale, arm)!r}"]
  bindings += [f"Trainer.{k} = {v!r}" for k, v in scale.pretrain.items()]
  bindings += list(scale.bindings)
  if corpus_dir is not None:
    bindings += corpus_lib.gin_bindings(corpus_dir, scale.vocabulary, scale.corpus)
  return bindings + list(arm.bindings)


def pretrain_gin_files(scale: Scale, arm: Arm) -> list[str]:
  return [f"gin/{scale.run_gin}"] + [f"gin/{f}" for f in arm.gin_files]


def corpus_cell(scale: Scale, out: str) -> Optional[Cell]:
  """The corpus cell of `scale` (None when the arms' gin files bring their own data)."""
  if scale.corpus is None:
    return None
  directory = os.path.join(out, "corpus")
  vocabulary = () if scale.vocabulary == "wordpiece" else (scale.vocabulary,)
  return Cell("corpus", "corpus", directory,
              _python("bertjax.tables.corpus", directory, scale.corpus, *vocabulary))


def arm_dir(out: str, arm: Arm) -> str:
  """The folder of an arm's pretrained model (its pretraining cell's `--model_dir`)."""
  return os.path.join(out, arm.name, "pretrain")


def pretrain_cell(scale: Scale, arm: Arm, out: str, corpus_dir: Optional[str]) -> Cell:
  """`python -m bertjax.main` for one arm; it needs the corpus and the arms in `arm.after`.
  '{out}' in the arm's bindings is the table's output folder (e.g. a teacher's path)."""
  model_dir = arm_dir(out, arm)
  bindings = [b.replace("{out}", out) for b in pretrain_bindings(scale, arm, corpus_dir)]
  command = _python("bertjax.main", f"--model_dir={model_dir}",
                    *[f"--gin_file={f}" for f in pretrain_gin_files(scale, arm)],
                    *[f"--gin_bindings={b}" for b in bindings])
  needs = (("corpus",) if corpus_dir else ()) + tuple(f"pretrain/{a}" for a in arm.after)
  return Cell(f"pretrain/{arm.name}", "pretrain", model_dir, command, arm=arm.name,
              needs=needs)


def finetune_cell(scale: Scale, arm: Arm, task: Task, seed: int, out: str,
                  module: str = "bertjax.finetune.run", flags: tuple[str, ...] = (),
                  step: Optional[int] = None) -> Cell:
  """One fine-tuning run of a pretrained arm (`module` takes --checkpoint, --output_dir,
  --task and --seed, then the scale's, the task's, the arm's and the given `flags`).
  `step`: start from the arm's checkpoint of that pretraining step (its
  `checkpoints/<step>` folder, which bertjax.finetune.run opens as that step's model)
  instead of its final model; the pretraining must keep that checkpoint."""
  checkpoint, where = arm_dir(out, arm), f"{task.name}/seed{seed}"
  if step is not None:
    checkpoint, where = os.path.join(checkpoint, CHECKPOINTS, str(step)), f"step{step}/{where}"
  directory = os.path.join(out, arm.name, where)
  command = _python(module, f"--checkpoint={checkpoint}", f"--output_dir={directory}",
                    f"--task={task.name}", f"--seed={seed}", *scale.finetune,
                    *scale.per_task.get(task.name, ()), *arm.finetune_flags, *flags)
  return Cell(f"finetune/{arm.name}/{where}", "finetune", directory,
              tuple(c.replace("{out}", out) for c in command), arm=arm.name, task=task.name,
              seed=seed, needs=(f"pretrain/{arm.name}",), fresh=True, step=step)


def text_to_text_cell(scale: Scale, arm: Arm, task: Task, seed: int, out: str,
                      corpus_dir: str, model_gin: tuple[str, ...], train_task: str) -> Cell:
  """`python -m bertjax.main` fine-tuning an arm's pretrained encoder-decoder text to text
  (T5): `model_gin` (under gin/) at the arm's sizes, initialised from its pretraining
  (INIT_CHECKPOINT), on `train_task` with the corpus's vocabulary, seed `seed`; then the
  scale's, the task's and the arm's flags (--gin_file / --gin_bindings)."""
  directory = os.path.join(out, arm.name, task.name, f"seed{seed}")
  bindings = [f"build_model.config_overrides = {model_overrides(scale, arm)!r}",
              f"INIT_CHECKPOINT = '{arm_dir(out, arm)}'", f"Trainer.train_task = '{train_task}'",
              f"Trainer.seed = {seed}"]
  bindings += corpus_lib.vocabulary_bindings(
      corpus_dir, scale.vocabulary, "bertjax.data.recipes.text_to_text.text_to_text_dataset")
  command = _python("bertjax.main", f"--model_dir={directory}",
                    *[f"--gin_file=gin/{f}" for f in model_gin],
                    *[f"--gin_bindings={b}" for b in bindings], *scale.finetune,
                    *scale.per_task.get(task.name, ()), *arm.finetune_flags)
  return Cell(f"finetune/{arm.name}/{task.name}/seed{seed}", "t2t_finetune", directory,
              tuple(c.replace("{out}", out) for c in command), arm=arm.name, task=task.name,
              seed=seed, needs=(f"pretrain/{arm.name}",), fresh=True)


def pretrain_then_finetune(table: Table, scale: Scale, out: str) -> list[Cell]:
  """The usual table: the corpus, every arm pretrained, each fine-tuned on every task x
  seed with `bertjax.finetune.run`."""
  corpus = corpus_cell(scale, out)
  result = [corpus] if corpus else []
  corpus_dir = corpus.directory if corpus else None
  arms = table.arms_at(scale)
  result += [pretrain_cell(scale, arm, out, corpus_dir) for arm in arms]
  result += [finetune_cell(scale, arm, task, seed, out)
             for arm in arms for task in table.tasks_at(scale) for seed in scale.seeds]
  return result


def cells(table: Table, scale_name: str, out: str) -> list[Cell]:
  """All cells of `table` at `scale_name` under folder `out`, in running order (each cell
  after the cells it needs): `table.cells`, or `pretrain_then_finetune`."""
  scale = table.scale(scale_name)
  build = table.cells or pretrain_then_finetune
  result = build(table, scale, os.path.abspath(out))
  keys = [c.key for c in result]
  if len(set(keys)) != len(keys):
    raise ValueError(f"Table {table.name!r} builds duplicate cells: {keys}.")
  for i, cell in enumerate(result):
    missing = [k for k in cell.needs if k not in keys[:i]]
    if missing:
      raise ValueError(f"Cell {cell.key!r} of table {table.name!r} needs {missing}, which "
                       "do not come before it.")
  return result


# ----------------------------------------------------------------------- records
def pretraining_record(model_dir: str) -> dict:
  """Steps, tokens, FLOPs (the trainer's analytic count per token x tokens), the final
  held-out metrics of a finished `python -m bertjax.main` run, and its word-order signals
  at every eval (`tables.word_order`)."""
  with open(os.path.join(model_dir, "results.json")) as f:
    results = json.load(f)
  per_token, tokens_per_step = None, None
  with open(os.path.join(model_dir, "metrics.jsonl")) as f:
    rows = [json.loads(line) for line in f if line.strip()]
  for row in rows:
    if row.get("split") == "train" and row.get("model_flops_per_sec"):
      per_token = row["model_flops_per_sec"] / row["tokens_per_sec"]
      tokens_per_step = row["tokens_per_sec"] / row["steps_per_sec"]
  steps = int(results["step"])
  tokens = round(tokens_per_step) * steps if tokens_per_step else None
  return {"steps": steps, "tokens": tokens, "flops_per_token": per_token,
          "flops": per_token * tokens if per_token and tokens else None,
          "eval": results.get("eval"), "tokens_per_step": tokens_per_step,
          "word_order": word_order.evals(model_dir)}


def finetune_record(directory: str) -> dict:
  with open(os.path.join(directory, "results.json")) as f:
    return json.load(f)


def text_to_text_record(directory: str) -> dict:
  """A text-to-text fine-tuning's generation-scored dev metrics (GenerationEvaluator's
  `generate_*`), under 'eval' as finetune.run's: `dev` holds each metric's best over the
  run's evaluations (T5 reports the best checkpoint on validation), `final` the last."""
  with open(os.path.join(directory, "metrics.jsonl")) as f:
    rows = [json.loads(line) for line in f if line.strip()]
  prefix = "generate_"
  evals = [{"step": r["step"], **{k[len(prefix):]: v for k, v in r.items()
                                  if k.startswith(prefix)}}
           for r in rows if r.get("split") == "eval" and any(k.startswith(prefix) for k in r)]
  if not evals:
    raise ValueError(f"No generation-scored evaluation in {directory}/metrics.jsonl: the run "
                     "needs Trainer.evaluators = [@GenerationEvaluator()] (runs/t5_finetune.gin).")
  names = [k for k in evals[-1] if k not in ("step", "examples", "invalid_predictions")]
  best = {k: max(e[k] for e in evals) for k in names}
  return {"eval": {"dev": best, "final": evals[-1]}, "evals": evals,
          "steps": finetune_record(directory)["step"]}


def corpus_record(directory: str) -> dict:
  with open(os.path.join(directory, corpus_lib.STATS_FILE)) as f:
    return json.load(f)


SPEED_FILE = "speed.json"


def speed_record(directory: str) -> dict:
  with open(os.path.join(directory, SPEED_FILE)) as f:
    return json.load(f)


RECORDS: dict[str, Callable[[str], dict]] = {
    "corpus": corpus_record, "pretrain": pretraining_record, "finetune": finetune_record,
    "t2t_finetune": text_to_text_record, "transfer": finetune_record, "speed": speed_record}
FINETUNE_KINDS = ("finetune", "t2t_finetune")  # the cells a table scores


def atomic_json(path: str, value: dict) -> None:
  """Writes a record (a done-marker, the ledger) whole or not at all."""
  paths.write_atomic(path, json.dumps(value, indent=2, default=str))
