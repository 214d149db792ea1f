"""A table's cells and how each runs: one subprocess command, done once.

  corpus                         python -m bertjax.tables.corpus OUT/corpus SIZE
  pretrain/<arm>                 python -m bertjax.main --model_dir=OUT/<arm>/pretrain ...
  finetune/<arm>/<task>/seed<n>  python -m bertjax.finetune.run --checkpoint=... --seed=n
                                 (or, text to text, python -m bertjax.main with the arm's
                                 model initialised from its pretraining: kind t2t_finetune)
  finetune/<arm>/step<k>/<task>/seed<n>   the same from the arm's checkpoint of step k

A table may build other cells (Table.cells), e.g. `transfer` (a command that writes a
results.json, as fine-tuning does) or `speed` (a timing that writes `speed.json`,
bertjax.distill.speed).

A cell is done when its folder holds `cell.json`, written atomically (tmp + rename) only
after its command exited 0: it records the command, wall time of every attempt and what
the cell produced (pretraining FLOPs and held-out metrics; the task's scores). Done cells
are skipped, so a killed or timed-out table run picks up where it stopped: a pretraining
cell resumes from its newest checkpoint (the trainer's own resumption), a fine-tuning
cell starts over in an emptied folder. Each attempt's output goes to `<cell>/cell.log`.
"""
import concurrent.futures
import dataclasses
import json
import os
import re
import shutil
import subprocess
import sys
import time
from typing import Callable, Optional

from bertjax import paths
from bertjax.tables import corpus as corpus_lib
from bertjax.tables.spec import Arm, Scale, Table, Task

MARKER = "cell.json"
ATTEMPTS = "attempts.jsonl"
LOG = "cell.log"
# A pretraining's step folders: <model_dir>/checkpoints/<step> (bertjax.checkpoints.RUN_SUBDIR,
# named here so that the runner does not load JAX).
CHECKPOINTS = "checkpoints"
# The table folder's JAX compilation cache, shared by its cells: seeds and arms of one size
# compile the same programs, and a cache hit skips XLA's compile (about 35 of a 90 s SST-2
# fine-tuning on 2 CPU cores) while running the very same executable.
COMPILATION_CACHE = "xla_cache"
# Cells that time something: they run with no other cell beside them (see `run`'s workers).
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
    bindings += corpus_lib.gin_bindings(corpus_dir, scale.vocabulary)
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


# ----------------------------------------------------------------------- running
def pretraining_record(model_dir: str) -> dict:
  """Steps, tokens, FLOPs (the trainer's analytic count per token x tokens) and the
  final held-out metrics of a finished `python -m bertjax.main` run."""
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
          "eval": results.get("eval")}


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
  paths.write_atomic(path, json.dumps(value, indent=2, default=str))


def _attempts(cell: Cell) -> list[dict]:
  path = os.path.join(cell.directory, ATTEMPTS)
  if not os.path.isfile(path):
    return []
  with open(path) as f:
    return [json.loads(line) for line in f if line.strip()]


def run_command(cell: Cell, out, timeout: Optional[float] = None,
                compilation_cache: Optional[str] = None,
                cpus: Optional[frozenset[int]] = None):
  """Runs the cell's command from the repository root, output to `out`; its exit status.
  With `compilation_cache`, the command keeps JAX's compiled programs there (unless the
  environment names its own JAX_COMPILATION_CACHE_DIR); with `cpus`, it runs on those cores
  only (`taskset`)."""
  env = {**os.environ, "PYTHONPATH": os.pathsep.join(
      [str(paths.REPO_ROOT)] + [p for p in [os.environ.get("PYTHONPATH")] if p])}
  if compilation_cache and not env.get("JAX_COMPILATION_CACHE_DIR"):
    env["JAX_COMPILATION_CACHE_DIR"] = compilation_cache
  try:
    pin = () if cpus is None else ("taskset", "--cpu-list", ",".join(map(str, sorted(cpus))))
    return subprocess.run(pin + (sys.executable,) + cell.command[1:], cwd=paths.REPO_ROOT,
                          env=env, stdout=out, stderr=subprocess.STDOUT, timeout=timeout,
                          check=False).returncode
  except subprocess.TimeoutExpired:
    return "timeout"


def recipe(cell: Cell, out: str) -> str:
  """The cell's command with the table's folder as `$OUT`: what its record must match for
  the cell to count as done wherever the table's folder lives."""
  return " ".join(a.replace(out, "$OUT") for a in cell.command)


def stale(cells: list[Cell], out: str, ledger: dict[str, dict]) -> list[tuple[str, str, str]]:
  """(key, recorded recipe, current recipe) of every finished cell (by its done-marker, else
  its ledger entry) made by another command than the table now gives it, or made from a
  cell so changed: its scale or arms changed since, and its results would mix two recipes.
  `cells` is in running order."""
  found, changed = [], set()
  for cell in cells:
    record = cell.record() if cell.done() else ledger.get(cell.key)
    if record is None:
      continue
    was = record.get("recipe") or _legacy_recipe(cell, record["command"], out)
    now = recipe(cell, out)
    if was != now or changed.intersection(cell.needs):
      changed.add(cell.key)
      found.append((cell.key, was, now))
  return found


def _legacy_recipe(cell: Cell, command: str, out: str) -> str:
  """The recipe of a record written before records kept one: its command with the folder it
  ran in (found before the cell's own path in it, else `out`) as `$OUT`."""
  inside = os.path.relpath(cell.directory, out)
  found = re.search(rf"(/[^\s=']*)/{re.escape(inside)}(?![^\s'/])", command)
  return command.replace(found.group(1) if found else out, "$OUT")


def run_cell(cell: Cell, log: Callable[[str], None] = print,
             execute: Callable[..., object] = run_command,
             table_out: Optional[str] = None, timeout: Optional[float] = None,
             cpus: Optional[frozenset[int]] = None) -> str:
  """Runs one cell (`execute(cell, log_file)` -> exit status, or 'timeout' when given
  `timeout` seconds and stopped there; on the cores `cpus` when given) and marks it done on
  success (recording its recipe when the table's folder `table_out` is given, and the
  number of cores when pinned). Returns 'ran', 'failed' or 'out_of_time' (stopped by its
  timeout: a cell that fails on its own near the limit is 'failed')."""
  if cell.fresh:
    shutil.rmtree(cell.directory, ignore_errors=True)
  os.makedirs(cell.directory, exist_ok=True)
  start = time.time()
  with open(os.path.join(cell.directory, LOG), "a") as out:
    out.write(f"\n$ {' '.join(cell.command)}\n")
    out.flush()
    options = {**({} if timeout is None else {"timeout": timeout}),
               **({} if cpus is None else {"cpus": cpus})}
    rc = execute(cell, out, **options)
  pinned = {} if cpus is None else {"cores": len(cpus)}
  attempt = {"start": start, "wall_s": time.time() - start, "rc": rc, **pinned}
  with open(os.path.join(cell.directory, ATTEMPTS), "a") as f:
    f.write(json.dumps(attempt) + "\n")
  if rc == "timeout":
    log(f"STOPPED {cell.key} at the sitting's time limit after {attempt['wall_s']:.0f} s"
        + (" (it resumes from its last checkpoint)" if cell.kind == "pretrain" else ""))
    return "out_of_time"
  if rc != 0:
    log(f"FAILED {cell.key} (exit {rc} after {attempt['wall_s']:.0f} s); "
        f"log: {os.path.join(cell.directory, LOG)}")
    return "failed"
  attempts = _attempts(cell)
  atomic_json(cell.marker, {
      "key": cell.key, "command": " ".join(cell.command),
      **({"recipe": recipe(cell, table_out)} if table_out else {}),
      "wall_s": attempt["wall_s"], **pinned,
      "wall_s_all_attempts": sum(a["wall_s"] for a in attempts), "attempts": len(attempts),
      "finished": time.time(), **RECORDS[cell.kind](cell.directory)})
  log(f"done {cell.key} in {attempt['wall_s']:.0f} s")
  return "ran"


def cpu_slots(workers: int) -> list[Optional[frozenset[int]]]:
  """The cores of each of `workers` cells run at once: this process's cores split into
  `workers` even groups ([None], no pinning, for one worker)."""
  if workers < 1:
    raise ValueError(f"--workers={workers}: run at least one cell at a time.")
  if workers == 1:
    return [None]
  if not hasattr(os, "sched_getaffinity") or not shutil.which("taskset"):
    raise ValueError(f"--workers={workers} pins each cell to its own cores with Linux's "
                     "`taskset` (util-linux), which this machine lacks; use --workers=1.")
  cores = sorted(os.sched_getaffinity(0))
  if workers > len(cores):
    raise ValueError(f"--workers={workers}: more cells at once than the {len(cores)} cores "
                     f"this process may use ({cores}); use at most --workers={len(cores)}.")
  share = len(cores) // workers
  return [frozenset(cores[i * share:(i + 1) * share]) for i in range(workers)]


def run(all_cells: list[Cell], log: Callable[[str], None] = print,
        execute: Callable[..., object] = run_command,
        on_done: Callable[[Cell], None] = lambda cell: None,
        table_out: Optional[str] = None,
        deadline: Optional[float] = None, workers: int = 1) -> dict[str, list[str]]:
  """Runs every cell not yet done whose prerequisites are done, calling `on_done(cell)`
  after each success (each done-marker records the cell's recipe when the table's folder
  `table_out` is given). With a `deadline` (a `time.time()`), no cell starts after it and
  those running then are stopped (`execute` gets `timeout=`).

  With `workers` > 1, up to that many cells run at once, each pinned to its share of the
  cores (`execute` gets `cpus=`), started in running order as their prerequisites finish;
  a timing cell (ALONE_KINDS) runs with no other cell beside it, on every core.
  Returns the keys {'skipped': ..., 'ran': ..., 'failed': ..., 'blocked': ...,
  'out_of_time': ...}: the last are the cells stopped at the deadline or not started for it."""
  status = {"skipped": [c.key for c in all_cells if c.done()],
            "ran": [], "failed": [], "blocked": [], "out_of_time": []}
  by_key = {c.key: c for c in all_cells}
  pending = [c for c in all_cells if not c.done()]
  unfinished = set()  # keys of this sitting's cells that failed, were blocked or ran out of time
  free = cpu_slots(workers)
  running = {}        # future -> (cell, its slot of cores)

  def end(cell: Cell, outcome: str) -> None:
    status[outcome].append(cell.key)
    if outcome != "ran":
      unfinished.add(cell.key)

  with concurrent.futures.ThreadPoolExecutor(max_workers=workers) as pool:
    while pending or running:
      for cell in list(pending):
        if unfinished.intersection(cell.needs):
          end(cell, "blocked")
        elif not all(by_key[k].done() for k in cell.needs):
          continue  # a prerequisite is still running or waiting
        elif deadline is not None and deadline <= time.time():
          end(cell, "out_of_time")
        elif not free or any(c.alone for c, _ in running.values()) or (cell.alone and running):
          break  # no cores for it yet; the cells after it wait too, keeping the running order
        else:
          slot = free.pop(0)
          log(f"running {cell.key}")
          left = None if deadline is None else deadline - time.time()
          cores = None if cell.alone else slot  # alone, it may use every core
          running[pool.submit(run_cell, cell, log, execute, table_out, left, cores)] = (cell,
                                                                                        slot)
        pending.remove(cell)
      if not running:
        continue
      finished, _ = concurrent.futures.wait(running,
                                            return_when=concurrent.futures.FIRST_COMPLETED)
      for future in finished:
        cell, slot = running.pop(future)
        free.append(slot)
        outcome = future.result()
        end(cell, outcome)
        if outcome == "ran":
          on_done(cell)
  return status
