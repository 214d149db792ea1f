"""The DistilBERT table: its grid (teacher -> inits -> students -> fine-tunings -> speed),
what each ablation binds and what that does to the triple loss, its report section, and
the README's command run for real at the tiny scale (teacher pretraining, student
initialisation, distillation, fine-tuning, the side-by-side speed measurement), README.md's
`python -m bertjax.tables distilbert` line."""
import dataclasses
import json
import os

import gin
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bertjax.checkpoints.params import load_params
from bertjax.objectives.distill import DistilBertLoss
from bertjax.tables import distilbert, grid, report, runner
from tests.tables.test_grid import FakeCommands
from bertjax.tables import __main__ as tables_cli
from tests.tables.test_table_cli import in_process, readme_table_commands

STUDENTS = [a.name for a in distilbert.STUDENTS]
ARMS = ["teacher"] + STUDENTS
# The tiny scale with every arm (the README's tiny run trains three of them).
ALL_ARMS = dataclasses.replace(distilbert.TABLE, scales={
    "tiny": dataclasses.replace(distilbert.TABLE.scale("tiny"), arms=None)})
# ... and on two seeds, for the report's means.
TWO_SEEDS = dataclasses.replace(distilbert.TABLE, scales={
    "tiny": dataclasses.replace(ALL_ARMS.scale("tiny"), seeds=(0, 1))})


def test_cells_run_teacher_then_inits_then_students_then_finetuning(tmp_path):
  out = str(tmp_path)
  cells = grid.cells(ALL_ARMS, "tiny", out)
  keys = [c.key for c in cells]
  assert keys == (["corpus", "pretrain/teacher", "init/every_other_layer", "init/random"]
                  + [f"pretrain/{s}" for s in STUDENTS]
                  + [f"finetune/{a}/sst2/seed0" for a in ARMS] + ["speed"])
  by_key = {c.key: c for c in cells}
  assert by_key["init/every_other_layer"].command[2:] == (
      "bertjax.tools.distilbert_init", f"--teacher={out}/teacher/pretrain",
      f"--out={out}/init/every_other_layer")
  assert by_key["init/random"].command[-1] == "--random_student"
  for name in STUDENTS:
    init = "random" if name == "random_init" else "every_other_layer"
    cell = by_key[f"pretrain/{name}"]
    assert cell.needs == ("corpus", "pretrain/teacher", f"init/{init}")
    assert f"--gin_bindings=DISTILLATION_INIT = '{out}/init/{init}'" in cell.command
    assert f"--checkpoint={out}/{name}/pretrain" in by_key[f"finetune/{name}/sst2/seed0"].command
  assert by_key["speed"].needs == ("finetune/teacher/sst2/seed0",
                                   "finetune/distilbert/sst2/seed0")


def _parsed(cell: grid.Cell) -> dict:
  """The gin a pretraining cell's command binds (parsed, not run)."""
  from bertjax import main  # pylint: disable=g-import-not-at-top
  files = [a.split("=", 1)[1] for a in cell.command if a.startswith("--gin_file=")]
  bindings = [a.split("=", 1)[1] for a in cell.command if a.startswith("--gin_bindings=")]
  gin.clear_config()
  try:
    main.parse_gin(files, bindings)
    return {name: gin.query_parameter(name) for name in (
        "DistilBertLoss.alpha_ce", "DistilBertLoss.alpha_mlm", "DistilBertLoss.alpha_cos",
        "DistilBertLoss.temperature", "%DISTILLATION_INIT", "Trainer.num_train_steps",
        "warmup_linear_decay.peak_value")} | {
        # The teacher's scope has no overrides of its own: it takes the unscoped ones.
        model: gin.query_parameter(f"{scope}build_model.config_overrides")["num_layers"]
        for model, scope in (("student", "student/"), ("teacher", ""))}
  finally:
    gin.clear_config()


def test_each_ablation_binds_zero_for_its_loss_term_and_the_student_is_half_deep(tmp_path):
  cells = {c.key: c for c in grid.cells(distilbert.TABLE, "cpu", str(tmp_path))}
  teacher = cells["pretrain/teacher"].command
  assert "--gin_bindings=Trainer.num_train_steps = 6000" in teacher  # the CPU recipe
  assert "--gin_bindings=MaskedLM.max_predictions = 20" in teacher
  zeroed = {"distilbert": None, "no_ce": "alpha_ce", "no_mlm": "alpha_mlm",
            "no_cos": "alpha_cos", "random_init": None}
  for name, term in zeroed.items():
    got = _parsed(cells[f"pretrain/{name}"])
    want = {"alpha_ce": 5.0, "alpha_mlm": 2.0, "alpha_cos": 1.0}
    if term:
      want[term] = 0.0
    assert {k: got[f"DistilBertLoss.{k}"] for k in want} == want, name
    assert got["DistilBertLoss.temperature"] == 2.0
    assert got["student"] == 2 and got["teacher"] == 4, name
    assert got["Trainer.num_train_steps"] == distilbert.STUDENT_STEPS["cpu"]
    assert got["warmup_linear_decay.peak_value"] == distilbert.STUDENT_PEAK_RATE == 5e-4
    init = "random" if name == "random_init" else "every_other_layer"
    assert got["%DISTILLATION_INIT"] == f"{tmp_path}/init/{init}"


def test_a_zeroed_weight_removes_exactly_that_term_from_the_loss():
  keys = jax.random.split(jax.random.key(0), 4)
  outputs = {"logits": jax.random.normal(keys[0], (2, 5, 11)),
             "teacher_logits": jax.random.normal(keys[1], (2, 5, 11)),
             "last_hidden_state": jax.random.normal(keys[2], (2, 5, 8)),
             "teacher_last_hidden_state": jax.random.normal(keys[3], (2, 5, 8))}
  batch = {"attention_mask": jnp.ones((2, 5)), "mlm_targets": jnp.arange(10).reshape(2, 5),
           "mlm_weights": jnp.array([[1, 0, 1, 0, 0], [0, 1, 0, 0, 1]], jnp.float32)}
  # What each term alone reads: changing it moves the full loss, not the ablated one.
  changes = {"alpha_ce": ("teacher_logits", 3.0), "alpha_cos": ("teacher_last_hidden_state", -1.0)}
  full = DistilBertLoss()
  for term, (key, scale) in changes.items():
    moved = {**outputs, key: outputs[key] * scale}
    ablated = DistilBertLoss(**{term: 0.0})
    assert float(full(moved, batch)[0]) != pytest.approx(float(full(outputs, batch)[0]))
    assert float(ablated(moved, batch)[0]) == pytest.approx(float(ablated(outputs, batch)[0]))
  relabelled = {**batch, "mlm_targets": batch["mlm_targets"][:, ::-1]}
  no_mlm = DistilBertLoss(alpha_mlm=0.0)
  assert float(full(outputs, relabelled)[0]) != pytest.approx(float(full(outputs, batch)[0]))
  assert float(no_mlm(outputs, relabelled)[0]) == pytest.approx(float(no_mlm(outputs, batch)[0]))
  # And the ablated loss is the other two terms at their usual weights.
  _, metrics = full(outputs, batch)
  mean = {k: float(s / n) for k, (s, n) in metrics.items()}
  assert float(no_mlm(outputs, batch)[0]) == pytest.approx(
      5.0 * mean["distill_ce_loss"] + 1.0 * mean["cos_loss"], rel=1e-5)


class FakeDistillation(FakeCommands):
  """FakeCommands plus the table's own kinds (init metadata, the speed report)."""
  SCORES = {"teacher": (0.80, 0.82), "distilbert": (0.78, 0.78), "no_ce": (0.70, 0.72),
            "no_mlm": (0.78, 0.77), "no_cos": (0.75, 0.75), "random_init": (0.66, 0.68)}

  def __call__(self, cell, out):
    if cell.kind == "init":
      self.ran.append(cell.key)
      with open(os.path.join(cell.directory, "metadata.json"), "w") as f:
        json.dump({"teacher_layers": [] if "random" in cell.key else [0],
                   "student_config": {"num_layers": 1}}, f)
      return 0
    if cell.kind == "speed":
      self.ran.append(cell.key)
      model = lambda layers, params, rate: {"layers": layers, "params": params,
                                            "params_without_embeddings": params // 4,
                                            "sentences_per_s": rate}
      with open(os.path.join(cell.directory, grid.SPEED_FILE), "w") as f:
        json.dump({"task": "sst2", "split": "dev", "sentences": 16, "batch_size": 8,
                   "repeats": 1, "devices": "[CpuDevice(id=0)]",
                   "teacher": model(2, 4000, 100.0), "student": model(1, 3000, 180.0),
                   "speedup": 1.8, "params_ratio": 0.75,
                   "params_ratio_without_embeddings": 0.75}, f)
      return 0
    if cell.kind == "finetune":
      self.ran.append(cell.key)
      with open(os.path.join(cell.directory, "results.json"), "w") as f:
        json.dump({"eval": {"dev": {"accuracy": self.SCORES[cell.arm][cell.seed]}}}, f)
      return 0
    return super().__call__(cell, out)


def test_report_gives_the_students_share_the_ablations_and_the_speed(tmp_path):
  cells = grid.cells(TWO_SEEDS, "tiny", str(tmp_path))
  status = runner.run(cells, log=lambda m: None, execute=FakeDistillation())
  assert not status["failed"] and not status["blocked"]
  assert cells[3].record()["teacher_layers"] == []
  text = report.markdown(TWO_SEEDS, "tiny", cells, "cmd")
  # Teacher 81.0, student 78.0: 96.3% of the teacher; - L_ce is 7.0 points below.
  assert "| BERT teacher | 81.0 | 81.0 | 100.0% | - |  |" in text
  assert "| DistilBERT (triple loss, teacher init) | 78.0 | 78.0 | 96.3% | - |  |" in text
  assert "| - L_ce | 71.0 | 71.0 | 87.7% | -7.00 | -2.96 |" in text
  assert "| random init | 67.0 | 67.0 | 82.7% | -11.00 | -3.69 |" in text
  assert "| student | 1 | 3,000 | 750 | 180.0 |" in text
  assert "Student / teacher parameters: 75% (75% without the embeddings); speed-up 1.80x" in text


def test_paper_scale_configs_parse(tmp_path):
  from bertjax.tables import __main__ as cli  # pylint: disable=g-import-not-at-top
  files = cli.write_paper_configs(distilbert.TABLE, str(tmp_path))
  assert [os.path.basename(f) for f in files] == [f"{a}.gin" for a in ARMS]
  cli.validate_paper_configs(files)


@pytest.mark.slow
def test_readme_command_at_tiny_scale(tmp_path):
  """The README's `python -m bertjax.tables distilbert` at the tiny scale, for real (in this
  process): the teacher pretrained, the student cut from its every other layer (and one
  drawn at random), distilled 2 steps, every arm fine-tuned, then timed side by side."""
  (argv,) = [a for a in readme_table_commands() if a[0] == "distilbert"]
  argv = [a.replace("--scale=cpu", "--scale=tiny") for a in argv]
  assert tables_cli.main(argv + [f"--out={tmp_path}", f"--results={tmp_path}/r.md"],
                         execute=in_process) == 0
  cells = {c.key: c for c in grid.cells(distilbert.TABLE, "tiny", str(tmp_path))}
  assert all(c.done() for c in cells.values())
  teacher, _ = load_params(str(tmp_path / "teacher" / "pretrain"))
  init, metadata = load_params(str(tmp_path / "init" / "every_other_layer"))
  record = cells["init/every_other_layer"].record()
  assert metadata["teacher_layers"] == [0] and (
      record["teacher_layers"], record["student_layers"]) == ([0], 1)
  layers = lambda tree: jax.tree.leaves(tree)
  for got, want in zip(layers(init["student"]["distilbert"]["encoder"]["layers"]),
                       layers(teacher["bert"]["encoder"]["layers"])):
    np.testing.assert_array_equal(got, want[[0]])  # the teacher's layer 0 of 2
  jax.tree.map(np.testing.assert_array_equal, init["teacher"], teacher)
  random_init, _ = load_params(str(tmp_path / "init" / "random"))
  assert set(random_init) == {"teacher"}  # the student is drawn by the distillation run
  finetuned = cells["finetune/distilbert/sst2/seed0"].record()
  assert 0.0 <= finetuned["eval"]["dev"]["accuracy"] <= 1.0
  speed = cells["speed"].record()
  assert (speed["teacher"]["layers"], speed["student"]["layers"]) == (2, 1)
  assert speed["student"]["params"] < speed["teacher"]["params"] and speed["speedup"] > 0
  assert "Student / teacher parameters:" in (tmp_path / "r.md").read_text()
