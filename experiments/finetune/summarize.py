"""Markdown table of the runs under experiments/finetune/out (one results.json each).

  python experiments/finetune/summarize.py [OUT_DIR]
  python experiments/finetune/summarize.py --families OUT_DIR   # families.sh's runs
"""
import json
import pathlib
import sys

# (run folder, eval split, metrics shown in %, label)
ROWS = [
    ("sst2", "dev", ("accuracy",), "SST-2 dev acc"),
    ("stsb", "dev", ("spearman", "pearson"), "STS-B dev Spearman / Pearson"),
    ("mrpc", "dev", ("f1", "accuracy"), "MRPC dev F1 / acc"),
    ("rte", "dev", ("accuracy",), "RTE dev acc"),
    ("conll2003", "dev", ("f1", "precision", "recall"), "CoNLL-2003 dev entity F1 / P / R"),
    ("conll2003_3ep", "dev", ("f1", "precision", "recall"), "CoNLL-2003 dev entity F1 / P / R"),
    ("squad11", "held_out", ("exact", "f1"), "SQuAD 1.1, 10 held-out articles, EM / F1"),
]


def _fmt(value: float, already_percent: bool) -> str:
  return f"{value if already_percent else 100 * value:.1f}"


def main(out_dir: str = "experiments/finetune/out") -> None:
  out = pathlib.Path(out_dir)
  print("| task | metric | score | train rows / steps | train s | eval s | wall s | skipped |")
  print("|---|---|---|---|---|---|---|---|")
  for folder, split, names, label in ROWS:
    path = out / folder / "results.json"
    if not path.exists():
      print(f"| {folder} | {label} | (not run) | | | | | |")
      continue
    report = json.loads(path.read_text())
    scores = report["eval"][split]
    percent = folder.startswith("squad")
    score = " / ".join(_fmt(scores[n], percent) for n in names)
    print(f"| {folder} | {label} | {score} | {report['train_rows']} / {report['train_steps']} | "
          f"{report['train_time_s']:.0f} | {scores['eval_time_s']:.0f} | "
          f"{report['wall_time_s']:.0f} | {report['skipped']['count']} |")
  features = out / "conll2003_features" / "results.json"
  if features.exists():
    report = json.loads(features.read_text())
    print(f"\nFeature-based CoNLL-2003 (frozen encoder, extraction {report['extract_time_s']:.0f} s, "
          f"wall {report['wall_time_s']:.0f} s):\n")
    print("| features | dev entity F1 | tagger steps | train s | total s |")
    print("|---|---|---|---|---|")
    for mode, scores in report["eval"].items():
      print(f"| {mode} | {100 * scores['f1']:.1f} | {scores['train_steps']} | "
            f"{scores['train_time_s']:.0f} | {scores['time_s']:.0f} |")


def families(out_dir: str) -> None:
  """One row per family of experiments/finetune/families.sh: its pretraining run, then SST-2,
  MRPC and CoNLL-2003 dev scores with their training rows / steps and wall times."""
  out = pathlib.Path(out_dir)
  tasks = [row for row in ROWS if row[0] in ("sst2", "mrpc", "conll2003")]
  # The second pass at lr 1e-3 for 3 epochs, where it was run (results.md gives its commands).
  tasks += [(f"{folder}_lr1e-3", split, names, f"{label}, lr 1e-3 x 3 epochs")
            for folder, split, names, label in tasks if folder != "mrpc"
            if any(out.glob(f"*/{folder}_lr1e-3/results.json"))]
  print("| family | pretraining steps / held-out MLM acc | "
        + " | ".join(f"{label} (rows / steps, wall s)" for _, _, _, label in tasks) + " |")
  print("|---" * (2 + len(tasks)) + "|")
  for family in sorted(p.name for p in out.iterdir() if (p / "pretrain" / "results.json").is_file()):
    pretrain = json.loads((out / family / "pretrain" / "results.json").read_text())
    held_out = pretrain.get("eval") or {}
    accuracy = held_out.get("mlm_accuracy", float("nan"))  # ELECTRA: its generator's
    cells = [f"{pretrain.get('step', '?')} / {100 * accuracy:.1f}"]
    for folder, split, names, _ in tasks:
      path = out / family / folder / "results.json"
      if not path.exists():
        cells.append("(not run)")
        continue
      report = json.loads(path.read_text())
      scores = report["eval"][split]
      cells.append(" / ".join(_fmt(scores[n], False) for n in names)
                   + f" ({report['train_rows']} / {report['train_steps']}, "
                   f"{report['wall_time_s']:.0f})")
    print(f"| {family} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
  if sys.argv[1:2] == ["--families"]:
    families(*sys.argv[2:])
  else:
    main(*sys.argv[1:])
