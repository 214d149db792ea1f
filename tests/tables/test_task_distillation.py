"""Tang et al.'s distillation table: its own cells (teacher -> scored transfer set ->
students -> speed) with the commands faked, the paper scale's script written and parsed,
and README.md's command run for real at the tiny scale (all-MiniLM-L6-v2 fine-tuned 2
steps -> transfer set -> every student -> the speed comparison)."""
import dataclasses
import json
import os
import re

import pytest

from bertjax.tables import __main__ as tables_cli
from bertjax.tables import grid, report, task_distillation as td
from tests.tables.test_table_cli import in_process, readme_table_commands

STUDENT_KEYS = [f"finetune/{a.name}/{{task}}/seed{s}" for a in td.STUDENTS for s in range(3)]
# What each fake student scores on dev: labels-only 0.70, distilled 0.75 (+ seed/100).
ACCURACY = {"labels": 0.70, "teacher": 0.75}


def fake(cell, out):
  """Writes what each command would: results.json / speed.json."""
  write = lambda name, value: open(os.path.join(cell.directory, name), "w").write(
      json.dumps(value))
  if cell.kind == "speed":
    students = [c.split("=", 1)[1] for c in cell.command if c.startswith("--student=")]
    write("speed.json", {"sentences": 512, "split": "dev", "batch_size": 64, "repeats": 3,
                         "devices": "[CpuDevice(id=0)]",
                         "teacher": {"params": 22_713_986, "sentences_per_s": 20.0},
                         "students": [{"source": s, "params": 2_000_000,
                                       "params_without_embeddings": 600_000,
                                       "sentences_per_s": 300.0, "speedup": 15.0,
                                       "params_ratio": 11.4} for s in students]})
  elif cell.arm == td.TEACHER:
    write("results.json", {"eval": {"dev": {"accuracy": 0.8, "f1": 0.85}}})
  elif cell.kind == "transfer":
    write("results.json", {"transfer_set": {"train_examples": 4000, "augmented": 7000}})
  else:
    targets = next(f.split("=")[1] for f in cell.command if f.startswith("--targets="))
    score = ACCURACY[targets] + cell.seed / 100
    agreement = {"teacher_agreement": 0.9} if targets == "teacher" else {}
    write("results.json", {"eval": {"dev": {"accuracy": score, "f1": score, **agreement}}})
  return 0


def test_cells_teacher_then_transfer_set_then_students_then_speed(tmp_path):
  cells = grid.cells(td.TABLE, "cpu", str(tmp_path))
  per_task = lambda t: ([f"teacher/{t}", f"transfer/{t}"] + [k.format(task=t)
                                                             for k in STUDENT_KEYS]
                        + [f"speed/{t}"])
  assert [c.key for c in cells] == per_task("sst2") + per_task("mrpc")
  by_key = {c.key: c for c in cells}
  teacher = by_key["teacher/sst2"]
  assert teacher.kind == "finetune" and teacher.arm == td.TEACHER and teacher.needs == ()
  assert teacher.command[2] == "bertjax.finetune.run"
  assert f"--checkpoint={td.minilm()}" in teacher.command
  assert "--max_train_examples=2000" in teacher.command
  scored = by_key["transfer/sst2"]
  assert scored.needs == ("teacher/sst2",)
  assert {"--transfer_only", "--augment", f"--teacher={teacher.directory}"} <= set(
      scored.command)
  # Each arm's flags: labels-only arms need nothing, distilled ones the scored set.
  want = {"bilstm_labels": ("bilstm", "labels", False),
          "bilstm_distilled": ("bilstm", "teacher", False),
          "bilstm_distilled_aug": ("bilstm", "teacher", True),
          "transformer_labels": ("transformer", "labels", False),
          "transformer_distilled": ("transformer", "teacher", False),
          "transformer_distilled_aug": ("transformer", "teacher", True)}
  for arm, (architecture, targets, augment) in want.items():
    cell = by_key[f"finetune/{arm}/mrpc/seed1"]
    flags = set(cell.command)
    assert cell.kind == "finetune" and (cell.arm, cell.task, cell.seed) == (arm, "mrpc", 1)
    assert {f"--architecture={architecture}", f"--targets={targets}", "--seed=1",
            "--task=mrpc"} <= flags
    assert ("--augment" in flags) == augment
    distilled = targets == "teacher"
    assert cell.needs == (("transfer/mrpc",) if distilled else ())
    assert (f"--transfer_from={by_key['transfer/mrpc'].directory}" in flags) == distilled
    assert ("--learning_rate=5e-4" in flags) == (architecture == "transformer")
  speed = by_key["speed/sst2"]
  seed0 = [f"finetune/{a.name}/sst2/seed0" for a in td.STUDENTS]
  assert speed.kind == "speed" and speed.needs == ("teacher/sst2",) + tuple(seed0)
  assert [c for c in speed.command if c.startswith("--student=")] == [
      f"--student={by_key[k].directory}" for k in seed0]


def test_fake_run_reports_scores_gains_and_speed(tmp_path):
  results = tmp_path / "table.md"
  args = ["task_distillation", "--scale=cpu", f"--out={tmp_path / 'out'}",
          f"--results={results}"]
  assert tables_cli.main(args, execute=fake) == 0
  text = results.read_text()
  assert "42 of 42 cells done" in text and "## Pretraining" not in text
  # Every arm's mean over 3 seeds; the teacher's single run.
  assert "| BiLSTM, labels only | 71.0 ± 1.0 (3) | 71.0 ± 1.0 (3) |" in text
  assert "| Transformer, distilled + augmentation | 76.0 ± 1.0 (3) | 76.0 ± 1.0 (3) |" in text
  assert "| Teacher (fine-tuned BERT) | 80.0 | 85.0 |" in text
  # Distilled vs labels-only of the same student: +5 with a standard error of 0.8.
  gains = text.split("## Distillation's gain", 1)[1].split("##", 1)[0]
  assert gains.count("| +5.0 ± 0.8 (better) | +5.0 ± 0.8 (better) |") == 4
  speed = text.split("## Size and inference speed", 1)[1]
  assert "| Teacher (fine-tuned BERT) | 22,713,986 | - | 20.0 | 1x | 1x |" in speed
  assert "| BiLSTM, distilled + augmentation | 2,000,000 | 600,000 | 300.0 | 15.0x | 11.4x |" \
      in speed
  cells = text.split("Each cell", 1)[1]
  assert "--out=$OUT/transfer/sst2 " in cells and str(tmp_path) not in cells
  # Scores read back from the committed ledger on a fresh machine.
  ledger = json.load(open(tmp_path / "table.cells.json"))
  assert ledger["speed/mrpc"]["students"][0]["speedup"] == 15.0
  assert report.metric(ledger["teacher/sst2"], "dev/accuracy") == 0.8
  # ... in another folder: the timed students are still named by their arms.
  os.rename(tmp_path / "out", tmp_path / "moved")
  moved = args[:2] + [f"--out={tmp_path / 'moved'}", f"--results={results}"]
  assert tables_cli.main(moved + ["--report_only"], execute=fake) == 0
  assert "| BiLSTM, distilled + augmentation | 2,000,000 | 600,000 | 300.0 | 15.0x | 11.4x |" \
      in results.read_text()


def test_a_scale_that_lists_arms_trains_only_those_students(tmp_path):
  scale = dataclasses.replace(td.TABLE.scale("cpu"), tasks=("sst2",),
                              arms=("bilstm_labels", "bilstm_distilled"))
  table = dataclasses.replace(td.TABLE, scales={"cpu": scale})
  keys = [c.key for c in grid.cells(table, "cpu", str(tmp_path))]
  assert keys == ["teacher/sst2", "transfer/sst2"] + [
      f"finetune/{arm}/sst2/seed{s}" for arm in scale.arms for s in scale.seeds] + ["speed/sst2"]


def test_paper_scale_writes_every_command_and_parses_its_flags(tmp_path):
  assert tables_cli.main(["task_distillation", "--scale=paper", f"--out={tmp_path}"]) == 0
  script = (tmp_path / "commands.sh").read_text()
  commands = [line for line in script.splitlines() if line.startswith("python -m")]
  # 3 tasks x (teacher, transfer set, 6 arms x 5 seeds, speed).
  assert len(commands) == 3 * (2 + 6 * 5 + 1)
  assert f"--checkpoint=${td.TEACHER_ENV} " in script and "--copies=20" in script
  assert {"--task=sst2", "--task=qqp", "--task=mnli"} <= set(script.split())
  assert "--width=512" in script and "--max_examples=0" in script
  bad = tmp_path / "bad.sh"
  bad.write_text(script.replace("--copies=20", "--copie=20", 1))
  with pytest.raises(Exception, match="copie"):
    tables_cli.validate_paper_commands(str(bad))


@pytest.mark.slow
def test_readme_command_at_tiny_scale(tmp_path):
  """README.md's `python -m bertjax.tables task_distillation` at the tiny scale, for real
  (in this process): all-MiniLM-L6-v2 fine-tuned 2 steps -> its transfer set -> every
  student on the tiny scale's one seed -> the speed comparison."""
  (argv,) = [a for a in readme_table_commands() if a[0] == "task_distillation"]
  argv = [a.replace("--scale=cpu", "--scale=tiny") for a in argv]
  out = str(tmp_path / "out")
  assert tables_cli.main(argv + [f"--out={out}", f"--results={tmp_path}/r.md"],
                         execute=in_process) == 0
  cells = {c.key: c for c in grid.cells(td.TABLE, "tiny", out)}
  assert all(c.done() for c in cells.values())
  teacher, scored = cells["teacher/sst2"].record(), cells["transfer/sst2"].record()
  trained = cells["finetune/transformer_distilled_aug/sst2/seed0"].record()
  assert teacher["train_steps"] == 2 and 0 <= teacher["eval"]["dev"]["accuracy"] <= 1
  assert scored["transfer_set"]["train_examples"] == 16
  assert 0 < scored["transfer_set"]["augmented"] <= 32
  assert trained["architecture"] == "transformer"
  assert trained["transfer_from"] == cells["transfer/sst2"].directory
  assert trained["transfer_set"] == scored["transfer_set"]
  # The reopened teacher scores dev as its fine-tuning run did.
  assert trained["teacher"]["dev"]["accuracy"] == pytest.approx(
      teacher["eval"]["dev"]["accuracy"])
  assert 0 <= trained["eval"]["dev"]["teacher_agreement"] <= 1
  speed = cells["speed/sst2"].record()
  assert len(speed["students"]) == len(td.STUDENTS)
  timed = next(s for s in speed["students"] if s["source"] == cells[
      "finetune/transformer_distilled_aug/sst2/seed0"].directory)
  assert timed["family"] == "transformer" and timed["params"] == trained["student_params"]
  assert speed["teacher"]["params"] == trained["teacher"]["params"] > timed["params"]
  text = (tmp_path / "r.md").read_text()
  assert re.search(r"\| Transformer, distilled \+ augmentation \| \d+\.\d \|", text), text
