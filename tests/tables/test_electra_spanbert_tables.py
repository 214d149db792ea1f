"""The SpanBERT and ELECTRA tables: their cells (commands faked) and what their results
show, the learning curve's checkpoint fine-tuning and its plot (tests/tables/test_table_cli.py
runs each README table command for real at tiny scale)."""
import dataclasses
import json
import os

import pytest

from bertjax.tables import __main__ as cli, electra, grid, report, runner, spanbert
from tests.tables.test_grid import FakeCommands


def _keys(table, scale, out):
  return [c.key for c in grid.cells(table, scale, str(out))]


def test_spanbert_arms_differ_only_in_masking_and_sbo(tmp_path):
  cells = {c.key: c for c in grid.cells(spanbert.TABLE, "cpu", str(tmp_path))}
  assert list(cells) == ["corpus"] + [f"pretrain/{a.name}" for a in spanbert.TABLE.arms] + [
      f"finetune/{a.name}/squad11/seed{s}" for a in spanbert.TABLE.arms for s in (0, 1)]
  command = lambda arm: cells[f"pretrain/{arm}"].command
  for arm in ("random_tokens", "whole_words", "span"):
    assert "--gin_file=gin/models/bert_mlm.gin" in command(arm)
    assert "--gin_file=gin/objectives/mlm.gin" in command(arm)
  assert "--gin_bindings=roberta_preprocessors.cross_documents = False" in command("random_tokens")
  assert "--gin_bindings=roberta_preprocessors.whole_word = True" in command("whole_words")
  assert "--gin_bindings=Trainer.train_task = 'spanbert'" in command("span")
  assert "--gin_file=gin/objectives/spanbert_mlm_sbo.gin" in command("span_sbo")
  # Every arm the same size and run.
  same = [b for b in command("span_sbo") if "config_overrides" in b or "Trainer." in b
          or "max_predictions" in b]
  assert "--gin_bindings=MaskedLM.max_predictions = 20" in same  # the MLM recipe, both heads
  assert all(b in command(a) for a in ("random_tokens", "span") for b in same)
  squad = cells["finetune/span_sbo/squad11/seed1"].command
  assert "--squad_train_articles=38" in squad and f"--checkpoint={tmp_path}/span_sbo/pretrain" in squad


def test_electra_table5_and_generator_sweep_cells(tmp_path):
  cells = {c.key: c for c in grid.cells(electra.TABLE5, "cpu", str(tmp_path))}
  arms = ["electra", "all_tokens_mlm", "replace_mlm", "electra_15", "bert"]
  assert [k for k in cells if k.startswith("pretrain/")] == [f"pretrain/{a}" for a in arms]
  assert len([k for k in cells if k.startswith("finetune/")]) == 5 * 3  # sst2 x 3 seeds
  gins = lambda arm: [c for c in cells[f"pretrain/{arm}"].command if c.startswith("--gin_file")]
  assert gins("electra_15")[-1] == "--gin_file=gin/objectives/electra_15.gin"
  assert "--gin_file=gin/models/electra_all_tokens_mlm.gin" in gins("all_tokens_mlm")
  assert "--gin_file=gin/models/electra_replace_mlm.gin" in gins("replace_mlm")
  assert "--gin_bindings=Trainer.train_task = 'electra'" in cells["pretrain/bert"].command
  # The ELECTRA recipe for every arm: the CPU scale's 6,000 steps at ELECTRA-Small's rate,
  # not the MLM recipe's 2e-3, heads at 20 positions.
  recipe = ["--gin_bindings=Trainer.num_train_steps = 6000",
            "--gin_bindings=warmup_linear_decay.peak_value = 5e-4",
            "--gin_bindings=ReplacedTokenDetection.max_predictions = 20",
            "--gin_bindings=MaskedLM.max_predictions = 20"]
  assert all(b in cells[f"pretrain/{arm}"].command for arm in arms for b in recipe)
  sweep = grid.cells(electra.GENERATOR_SIZE, "cpu", str(tmp_path))
  fractions = [next(b for b in c.command if "config_overrides" in b) for c in sweep
               if c.kind == "pretrain"]
  for got, want in zip(fractions, ("0.25", "0.5", "0.75", "1.0")):
    assert f"'generator_fraction': {want}" in got and "'embedding_size': 128" in got
  # Every generator of the sweep is a valid width / heads split at every runnable scale.
  from bertjax.models import electra as models
  widths = [models.ElectraConfig(**grid.model_overrides(electra.GENERATOR_SIZE.scale(s), arm))
            .generator_config().hidden_size
            for s in ("tiny", "cpu") for arm in electra.GENERATOR_SIZE.arms]
  assert widths == [8, 16, 24, 32, 32, 64, 96, 128]


def test_learning_curve_fine_tunes_checkpoints_and_plots_score_against_flops(tmp_path):
  table, out = electra.LEARNING_CURVE, tmp_path / "out"
  cpu = {c.key: c for c in grid.cells(table, "cpu", str(out))}
  assert electra.curve_steps(table.scale("cpu")) == [1000, 3000, 6000]
  assert electra.curve_steps(table.scale("paper")) == [191500, 383000, 766000]
  early = cpu["finetune/electra/step1000/sst2/seed1"]
  assert f"--checkpoint={out}/electra/pretrain/checkpoints/1000" in early.command
  assert early.step == 1000 and early.needs == ("pretrain/electra",)
  assert "finetune/bert/sst2/seed2" in cpu  # the last step: the final model's cell
  assert "--gin_bindings=Trainer.keep_checkpoints = 6" in cpu["pretrain/bert"].command
  # Run the tiny grid (on two seeds) with fake commands: steps 1 and 2, scores rising with
  # the step.
  table = dataclasses.replace(table, scales={
      **table.scales, "tiny": dataclasses.replace(table.scale("tiny"), seeds=(0, 1))})
  cells = grid.cells(table, "tiny", str(out))
  fake = FakeCommands()

  def execute(cell, log):
    if cell.kind == "finetune":
      score = {"electra": 0.6, "bert": 0.5}[cell.arm] + (0.0 if cell.step else 0.1)
      open(os.path.join(cell.directory, "results.json"), "w").write(
          json.dumps({"eval": {"dev": {"accuracy": score + 0.01 * cell.seed}}}))
      return 0
    return fake(cell, log)

  status = runner.run(cells, log=lambda m: None, execute=execute)
  assert not status["failed"] and len(status["ran"]) == len(cells) == 1 + 2 + 2 * 2 * 2
  assert report.scores(cells, "electra", electra.SST2, "dev/accuracy") == pytest.approx(
      [70.0, 71.0])
  assert report.scores(cells, "electra", electra.SST2, "dev/accuracy", step=1) == pytest.approx(
      [60.0, 61.0])
  scale = table.scale("tiny")
  # The fake pretraining: 128 tokens per step at 1e6 FLOPs per token, 2 steps.
  assert electra.curve_points(table, scale, cells, electra.BERT, electra.SST2) == [
      (1, pytest.approx(128e6), pytest.approx([50.0, 51.0])),
      (2, pytest.approx(256e6), pytest.approx([60.0, 61.0]))]
  lines = electra.curve_report(table, scale, cells)
  assert "| ELECTRA | 1 | 1.28e+08 | 60.5 ± 0.7 (2) |" in lines
  assert electra.plot_curve(table, "tiny", cells, str(tmp_path / "curve.png"))
  text = report.markdown(table, "tiny", cells, "cmd")
  assert "| ELECTRA | 70.5 ± 0.7 (2) |" in text and "## Learning curve" in text


def test_learning_curve_refuses_a_scale_that_drops_its_checkpoints():
  import dataclasses
  scale = electra.LEARNING_CURVE.scale("cpu")
  dropped = dataclasses.replace(scale, pretrain={**scale.pretrain, "keep_checkpoints": 3})
  with pytest.raises(ValueError, match="keep_checkpoints >= 6"):
    electra.curve_steps(dropped)


ELECTRA_TABLES = (electra.TABLE5, electra.GENERATOR_SIZE, electra.LEARNING_CURVE)


@pytest.mark.parametrize("scale", ["tiny", "cpu"])
def test_the_electra_tables_share_one_folder_and_their_common_runs(scale, tmp_path):
  """Table 5's ELECTRA and BERT runs are the learning curve's, and its ELECTRA the generator
  sweep's 1/4: one folder, and one command for every key two of the tables build."""
  outs = {cli.default_out(t, scale) for t in ELECTRA_TABLES}
  assert outs == {cli.default_out(electra.TABLE5, scale)} and outs.pop().endswith(
      f"electra/{'out/' if scale == 'cpu' else ''}electra_{scale}")
  # The paper's scale writes a gin file per arm: each table keeps its own folder there.
  assert len({cli.default_out(t, "paper") for t in ELECTRA_TABLES}) == 3
  commands = {}
  for table in ELECTRA_TABLES:
    for cell in grid.cells(table, scale, str(tmp_path)):
      commands.setdefault(cell.key, set()).add(cell.command)
  assert all(len(c) == 1 for c in commands.values()), [k for k, c in commands.items()
                                                       if len(c) > 1]
  if scale == "cpu":
    pretrainings = sorted(k for k in commands if k.startswith("pretrain/"))
    assert pretrainings == [f"pretrain/{a}" for a in sorted(
        ["electra", "all_tokens_mlm", "replace_mlm", "electra_15", "bert",
         "generator_1_2", "generator_3_4", "generator_1_1"])]
    sweep = {a.label: a.name for a in electra.GENERATOR_SIZE.arms}
    assert sweep["generator 1/4"] == "electra"
    # 5 + 4 + 2 pretrainings and 15 + 12 + 18 fine-tunings, 8 and 36 of them distinct.
    assert len(commands) == 1 + 8 + 15 + 9 + 12


def test_a_table_sharing_the_folder_reruns_only_its_own_cells(tmp_path):
  """Run at the tiny scale with fake commands in one folder: the generator sweep and the
  learning curve find Table 5's ELECTRA pretraining and fine-tuning done."""
  def execute(cell, log, timeout=None):
    if cell.kind == "finetune":
      open(os.path.join(cell.directory, "results.json"), "w").write(
          json.dumps({"eval": {"dev": {"accuracy": 0.5}}}))
      return 0
    return FakeCommands()(cell, log)

  ran = {}
  for table in ELECTRA_TABLES:
    status = runner.run(grid.cells(table, "tiny", str(tmp_path)), log=lambda m: None,
                        execute=execute)
    assert not status["failed"]
    ran[table.name] = status["ran"]
  assert ran["electra_generator_size"] == ["pretrain/generator_1_1",
                                           "finetune/generator_1_1/sst2/seed0"]
  # Table 5 trains no BERT at the tiny scale: the curve trains it, and all its points.
  assert sorted(ran["electra_learning_curve"]) == [
      "finetune/bert/sst2/seed0", "finetune/bert/step1/sst2/seed0",
      "finetune/electra/step1/sst2/seed0", "pretrain/bert"]


def test_paper_configs_of_the_new_tables_parse(tmp_path):
  for table in (spanbert.TABLE, electra.TABLE5, electra.GENERATOR_SIZE, electra.LEARNING_CURVE):
    cli.validate_paper_configs(cli.write_paper_configs(table, str(tmp_path / table.name)))


def test_step_folder_is_the_trainers():
  from bertjax.checkpoints import RUN_SUBDIR
  assert grid.CHECKPOINTS == RUN_SUBDIR
