"""A table's results.md (and plot) from the `cell.json` of its finished cells.

Scores are mean ± sample std over the seeds done (n in parentheses); each arm's
pretraining is reported in FLOPs (the trainer's analytic count x tokens), wall time
(all attempts; with the cores it was pinned to when cells ran side by side) and its
held-out metrics. "vs first arm" gives each arm's difference
from the table's first (reference) arm with its standard error; a difference within
two standard errors is marked "within noise".
"""
import math
import os
import re
import textwrap
from typing import Optional

from bertjax.tables import grid, ledger, word_order
from bertjax.tables.spec import Arm, Table, Task


def shell_word(arg: str) -> str:
  """`arg` as one shell word: as it is when plain, else double-quoted with only `$NAME`
  variables (`$OUT`, the table's folder; a paper run's checkpoint) left to expand."""
  if re.fullmatch(r"[\w=./:,$-]+", arg):
    return arg
  escaped = re.sub(r'(["\\`])', r"\\\1", arg)
  escaped = re.sub(r"\$(?![A-Z_][A-Z0-9_]*)", r"\\$", escaped)
  return f'"{escaped}"'


def metric(record: dict, path: str) -> Optional[float]:
  """A '/'-path into a fine-tuning run's final (best-epoch) scores, `results.json['eval']`."""
  value = record.get("eval", record)
  for key in path.split("/"):
    if not isinstance(value, dict) or key not in value:
      return None
    value = value[key]
  return float(value) if isinstance(value, (int, float)) else None


def percent(value: float, path: str) -> float:
  """Fractions as percentages (SQuAD's EM / F1 already are)."""
  return value if path.split("/")[0] == "held_out" else 100.0 * value


def mean_std(values: list[float]) -> tuple[float, float]:
  mean = sum(values) / len(values)
  if len(values) < 2:
    return mean, float("nan")
  return mean, math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))


def scores(cells: list[grid.Cell], arm: str, task: Task, path: str,
           step: Optional[int] = None) -> list[float]:
  """The finished seeds' scores of `arm` on `task`: of its final model, or (`step`) of its
  checkpoint of that pretraining step."""
  out = []
  for cell in cells:
    if (cell.kind in grid.FINETUNE_KINDS and cell.done()
        and (cell.arm, cell.task, cell.step) == (arm, task.name, step)):
      value = metric(cell.record(), path)
      if value is not None:
        out.append(percent(value, path))
  return out


def format_scores(values: list[float]) -> str:
  """The seeds' scores as "mean ± std (n)" (the mean alone for one seed, "-" for none)."""
  if not values:
    return "-"
  mean, std = mean_std(values)
  return f"{mean:.1f}" if len(values) < 2 else f"{mean:.1f} ± {std:.1f} ({len(values)})"


def _duration(seconds: Optional[float]) -> str:
  if seconds is None:
    return "-"
  return f"{seconds / 60:.1f} min" if seconds < 3600 else f"{seconds / 3600:.2f} h"


def _cores(record: dict) -> str:
  """How a cell run beside others (`--workers`) was pinned, since its wall time depends on it."""
  cores = record.get("cores")
  return "" if cores is None else f" on {cores} core{'s' if cores > 1 else ''}"


def versus(reference: list[float], other: list[float]) -> str:
  if len(reference) < 2 or len(other) < 2:
    return "-"
  (m0, s0), (m1, s1) = mean_std(reference), mean_std(other)
  diff, se = m1 - m0, math.sqrt(s0 ** 2 / len(reference) + s1 ** 2 / len(other))
  verdict = "within noise" if abs(diff) <= 2 * se else ("better" if diff > 0 else "worse")
  return f"{diff:+.1f} ± {se:.1f} ({verdict})"


def _results_text(results: dict[str, float]) -> str:
  return ", ".join(f"{k} {v:.5g}" for k, v in results.items())


def _rebuild_note(key: str, build: dict, record: dict) -> str:
  """What results.md says of a cell whose rerun differed from its earlier `build`."""
  if "part_tokens" in build:  # a corpus
    return ("**The corpus was rebuilt in a later sitting with another vocabulary** "
            f"(earlier build: {sum(build['part_tokens'].values()):,} train tokens"
            + (f", vocab.txt sha256 {build['vocab_sha256'][:12]}" if "vocab_sha256" in build
               else "") + "): cells finished before the rebuild were trained on the earlier "
            "one, so rows may mix the two.")
  now = _results_text(ledger.held_out_results(record.get("eval")))
  return (f"**{key} was run again in a later sitting with other held-out results** "
          f"(earlier: {_results_text(build['eval'])}; now: {now}): cells made from it "
          "before were made from the earlier run, so rows may mix the two.")


def baselines(cells: list[grid.Cell]) -> Optional[dict]:
  """The held-out text's unigram and count bigram cross-entropy (the corpus cell's stats)."""
  corpus = next((c for c in cells if c.kind == "corpus" and c.done()), None)
  return (corpus.record() or {}).get("held_out_cross_entropy") if corpus else None


def _last_signals(rec: dict) -> Optional[dict]:
  curve = rec.get("word_order")
  return curve[-1] if curve else rec.get("eval")


def _pretraining_rows(arms: tuple[Arm, ...], cells: list[grid.Cell]) -> list[str]:
  rows = ["| arm | steps | tokens | FLOPs | FLOPs/token | wall (all attempts) | held-out | "
          "learned word order? (last eval) |",
          "|---|---:|---:|---:|---:|---:|---|---|"]
  base = baselines(cells)
  for arm in arms:
    cell = next((c for c in cells if c.key == f"pretrain/{arm.name}"), None)
    if cell is None:
      rows.append(f"| {arm.label} | no pretraining | | | | | | |")
      continue
    rec = cell.record()
    if rec is None:
      rows.append(f"| {arm.label} | not done | | | | | | |")
      continue
    held = ", ".join(f"{k} {v:.3f}" for k, v in sorted((rec.get("eval") or {}).items())
                     if k.endswith(("accuracy", "loss")))
    flops, per_token, tokens = rec.get("flops"), rec.get("flops_per_token"), rec.get("tokens")
    rows.append(f"| {arm.label} | {rec['steps']} | {f'{tokens:,}' if tokens else '-'} | "
                f"{f'{flops:.3g}' if flops else '-'} | "
                f"{f'{per_token / 1e6:.2f} M' if per_token else '-'} | "
                f"{_duration(rec.get('wall_s_all_attempts'))}{_cores(rec)} | {held} | "
                f"{word_order.summary(_last_signals(rec), base)} |")
  return rows


def _score_rows(arms: tuple[Arm, ...], tasks: tuple[Task, ...],
                cells: list[grid.Cell]) -> list[str]:
  head = "| arm | " + " | ".join(t.label for t in tasks) + " |"
  rows = [head, "|---|" + "---:|" * len(tasks)]
  for arm in arms:
    rows.append(f"| {arm.label} | " + " | ".join(
        format_scores(scores(cells, arm.name, t, t.metric)) for t in tasks) + " |")
  extras = [(t, p) for t in tasks for p in t.extra]
  if extras:
    rows += ["", "| arm | " + " | ".join(f"{t.name} {p}" for t, p in extras) + " |",
             "|---|" + "---:|" * len(extras)]
    for arm in arms:
      rows.append(f"| {arm.label} | " + " | ".join(
          format_scores(scores(cells, arm.name, t, p)) for t, p in extras) + " |")
  if len(arms) > 1:
    first = arms[0]
    rows += ["", f"Difference from {first.label} (mean, ± standard error of the difference):",
             "", head, "|---|" + "---:|" * len(tasks)]
    for arm in arms[1:]:
      rows.append(f"| {arm.label} | " + " | ".join(
          versus(scores(cells, first.name, t, t.metric), scores(cells, arm.name, t, t.metric))
          for t in tasks) + " |")
  return rows


def markdown(table: Table, scale_name: str, cells: list[grid.Cell], command: str,
             plot: Optional[str] = None, word_order_plot: Optional[str] = None) -> str:
  scale = table.scale(scale_name)
  tasks, arms = table.tasks_at(scale), table.arms_at(scale)
  done = [c for c in cells if c.done()]
  lines = [f"# {table.title}", "",
           f"Scale `{scale_name}`; {len(done)} of {len(cells)} cells done"
           + ("" if len(done) == len(cells) else
              " (not done: " + ", ".join(c.key for c in cells if not c.done()) + ")") + ".",
           "", f"**The paper:** {table.direction}", ""]
  if scale.departure:
    lines += [f"**Departs from the paper:** {scale.departure}", ""]
  lines += ["## Downstream (mean ± std over seeds)", ""] + _score_rows(arms, tasks, cells)
  if plot:
    lines += ["", f"![{table.name}]({os.path.basename(plot)})"]
  if any(c.kind == "pretrain" for c in cells):
    lines += ["", "## Pretraining (equal steps x batch x length for every arm)", ""]
    lines += _pretraining_rows(arms, cells)
    base = baselines(cells)
    lines += ["", "Learned word order: held-out loss at the [MASK] and random positions below "
              "the held-out text's count bigram"
              + (f" ({base['bigram']:.2f} nats; unigram {base['unigram']:.2f})" if base else "")
              + f", and a head with more than {word_order.GATE_ATTENTION:.0%} of its attention "
              "on the previous or next token (experiments/scale)."]
    if word_order_plot:
      lines += ["", f"![{table.name} word order]({os.path.basename(word_order_plot)})"]
  corpus = next((c for c in cells if c.kind == "corpus"), None)
  if corpus is not None and corpus.done():
    rec = corpus.record()
    vocabulary = {"wordpiece": "WordPiece", "sentencepiece": "SentencePiece"}[
        rec.get("vocabulary", "wordpiece")]
    lines += ["", f"Corpus ({rec['size']}): {rec['train_tokens']:,} train / "
              f"{rec['validation_tokens']:,} held-out {vocabulary} tokens, vocabulary "
              f"{rec['vocab_size']:,} (bertjax/tables/corpus.py): "
              + ", ".join(f"{p} {v['tokens']:,}" for p, v in rec["parts"]["train"].items())
              + "."]
  for cell in cells:  # cells run again in a later sitting that came out otherwise
    record = cell.record() or {}
    for build in record.get("earlier_builds", []):
      lines += ["", _rebuild_note(cell.key, build, record)]
  lines += ["", "## Arms", ""] + [
      f"- **{a.label}** (`{a.name}`): " + "; ".join(part for part in (
          " ".join(f"`{f}`" for f in a.gin_files + a.bindings + a.finetune_flags), a.note)
          if part) for a in table.arms]
  if table.report is not None:
    lines += [""] + table.report(table, scale, cells)
  if table.notes:
    lines += ["", "## Notes", ""] + [f"- {n}" for n in table.notes]
  # The table's folder: the corpus cell's parent, else the folder all cells share.
  out = (os.path.dirname(cells[0].directory) if cells[0].kind == "corpus" else
         os.path.commonpath([c.directory for c in cells]) if len(cells) > 1 else None)
  lines += ["", "## Commands", "", "The whole table (resumable: run it again to go on):", "",
            "```", command, "```", "", "Each cell (`$OUT` = the table's output folder):", "",
            "```"]
  for cell in cells:
    lines.append(" ".join(shell_word(a.replace(out, "$OUT") if out else a)
                          for a in cell.command))
  return "\n".join(lines + ["```", ""])


def plot_word_order(table: Table, scale_name: str, cells: list[grid.Cell],
                    path: str) -> Optional[str]:
  """Each arm's two word-order signals against its training tokens, so the step where it
  learns word order shows (`tables.word_order.plot`)."""
  curves = {}
  for arm in table.arms_at(table.scale(scale_name)):
    cell = next((c for c in cells if c.key == f"pretrain/{arm.name}"), None)
    rec = cell.record() if cell is not None else None
    if rec and rec.get("word_order") and rec.get("tokens_per_step"):
      curves[arm.label] = (rec["word_order"], rec["tokens_per_step"])
  return word_order.plot(curves, baselines(cells), path,
                         plot_title(table, scale_name, 11)) if curves else None


def plot_title(table: Table, scale_name: str, width_inches: float) -> str:
  """The table's title and scale, wrapped to a figure `width_inches` wide (about 12
  characters an inch at the 9-point size the plots use)."""
  return textwrap.fill(f"{table.title} ({scale_name})", int(12 * width_inches))


def plot_scores(table: Table, scale_name: str, cells: list[grid.Cell], path: str) -> Optional[str]:
  """Grouped bars (one group per task, one bar per arm) with the seeds' std."""
  import matplotlib  # pylint: disable=g-import-not-at-top
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top
  scale = table.scale(scale_name)
  tasks, arms = table.tasks_at(scale), table.arms_at(scale)
  width_inches = 1.8 + 1.6 * len(tasks)
  fig, ax = plt.subplots(figsize=(width_inches, 3.2))
  width = 0.8 / len(arms)
  any_bar = False
  for i, arm in enumerate(arms):
    means, stds = [], []
    for task in tasks:
      values = scores(cells, arm.name, task, task.metric)
      mean, std = mean_std(values) if values else (float("nan"), float("nan"))
      means.append(mean)
      stds.append(0.0 if math.isnan(std) else std)
      any_bar |= bool(values)
    ax.bar([t + i * width for t in range(len(tasks))], means, width, yerr=stds,
           label=arm.label, capsize=2)
  if not any_bar:
    plt.close(fig)
    return None
  ax.set_xticks([t + 0.4 - width / 2 for t in range(len(tasks))])
  ax.set_xticklabels([t.label for t in tasks], fontsize=8)
  ax.set_ylabel("score (mean ± std over seeds)")
  ax.set_title(plot_title(table, scale_name, width_inches), fontsize=9)
  # Below the axes, so that no bar or error bar hides behind it.
  ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=2)
  fig.savefig(path, dpi=110, bbox_inches="tight")
  plt.close(fig)
  return path
