"""T5's objective tables: one pretraining per objective variant, each fine-tuned text to text
from its weights and scored on generated text (commands faked here; tests/tables/test_table_cli.py
runs the README's table commands for real at tiny scale)."""
import json
import os

import pytest

from bertjax.tables import __main__ as cli
from bertjax.tables import grid, report, runner, t5
from bertjax.data.preprocessors import span_corruption

TABLES = (t5.OBJECTIVES, t5.CORRUPTION)


def test_the_two_tables_pretrain_every_paper_variant_once(tmp_path):
  """15 arms over 13 distinct variants: the corruption table's 15% i.i.d. and mean-span-3
  rows are the objectives table's i.i.d. replace spans and span corruption runs, shared in
  one folder (one command per key)."""
  variant = lambda name: tuple(sorted(span_corruption.PAPER_VARIANTS[name].items()))
  names = {arm.name for table in TABLES for arm in table.arms}
  assert sum(len(table.arms) for table in TABLES) == 15 and len(names) == 13
  assert {variant(n) for n in names} == {variant(n) for n in span_corruption.PAPER_VARIANTS}
  assert len({variant(n) for n in names}) == 13
  assert variant("corruption_rate_15") == variant("iid_replace_spans")
  assert variant("span_length_3") == variant("span_corruption")
  assert cli.default_out(t5.OBJECTIVES, "cpu") == cli.default_out(t5.CORRUPTION, "cpu")
  labels = {a.name: a.label for a in t5.CORRUPTION.arms}
  assert labels["iid_replace_spans"] == "i.i.d. 15%"
  assert labels["span_corruption"] == "spans of mean length 3"
  commands = {}
  for table in TABLES:
    for cell in grid.cells(table, "cpu", str(tmp_path)):
      commands.setdefault(cell.key, set()).add(cell.command)
  assert len(commands) == 1 + 13 + 13 * 3 and all(len(c) == 1 for c in commands.values())


@pytest.mark.parametrize("table", TABLES, ids=lambda t: t.name)
def test_cells_pretrain_each_variant_then_fine_tune_text_to_text_from_it(table, tmp_path):
  cells = grid.cells(table, "cpu", str(tmp_path))
  arms = [a.name for a in table.arms]
  tasks = ["sst2"]
  assert [c.key for c in cells] == (
      ["corpus"] + [f"pretrain/{a}" for a in arms]
      + [f"finetune/{a}/{t}/seed{s}" for a in arms for t in tasks for s in (0, 1, 2)])
  corpus, by_key = cells[0], {c.key: c for c in cells}
  assert corpus.command[-2:] == ("cpu", "sentencepiece")
  spm = f"c4_sentencepiece.cache_dir = '{tmp_path}/corpus/sentencepiece'"
  for arm in arms:
    pretrain = by_key[f"pretrain/{arm}"]
    assert pretrain.needs == ("corpus",)
    # The variant's task is bound last, after the objective file's default.
    assert pretrain.command[-1] == f"--gin_bindings=Trainer.train_task = 't5_{arm}'"
    assert "--gin_file=gin/runs/t5_pretrain.gin" in pretrain.command
    assert f"--gin_bindings={spm}" in pretrain.command
    assert "--gin_bindings=Trainer.num_train_steps = 300" in pretrain.command
  finetune = by_key[f"finetune/{arms[1]}/sst2/seed2"]
  assert finetune.kind == "t2t_finetune" and finetune.fresh
  assert finetune.needs == (f"pretrain/{arms[1]}",)
  command = finetune.command
  assert command[:4] == ("python", "-m", "bertjax.main", f"--model_dir={finetune.directory}")
  for binding in (f"INIT_CHECKPOINT = '{tmp_path}/{arms[1]}/pretrain'",
                  "Trainer.train_task = 't2t_glue_sst2'", "Trainer.seed = 2", spm,
                  "bertjax.data.recipes.text_to_text.text_to_text_dataset.vocabulary = "
                  "@c4_sentencepiece()"):
    assert f"--gin_bindings={binding}" in command
  assert "--gin_file=gin/runs/t5_finetune.gin" in command
  # The fine-tuned model is the pretrained one: same files, same sizes.
  sizes = [c for c in by_key[f"pretrain/{arms[1]}"].command if "config_overrides" in c]
  assert sizes and sizes[0] in command and "--gin_file=gin/models/t5_base.gin" in command


def _fake(cell, out):
  """What each command writes: generation-scored evaluations for the fine-tunings."""
  write = lambda name, value: open(os.path.join(cell.directory, name), "w").write(value)
  if cell.kind == "corpus":
    write("stats.json", json.dumps({"size": "tiny", "vocabulary": "sentencepiece",
                                    "vocab_size": 600, "train_tokens": 10,
                                    "validation_tokens": 2,
                                    "parts": {"train": {"c4": {"tokens": 10}}}}))
  elif cell.kind == "pretrain":
    write("results.json", json.dumps({"step": 2, "eval": {"seq2seq_accuracy": 0.2}}))
    write("metrics.jsonl", json.dumps({"split": "train", "steps_per_sec": 1.0,
                                       "tokens_per_sec": 256.0,
                                       "model_flops_per_sec": 1e8}) + "\n")
  else:
    evals = [(1, 0.5 + 0.1 * cell.seed), (2, 0.4 + 0.1 * cell.seed)]  # best is the first
    write("metrics.jsonl", "".join(
        json.dumps({"split": "eval", "step": step, "loss": 1.0, "generate_accuracy": acc,
                    "generate_examples": 16.0, "generate_invalid_predictions": 0.0}) + "\n"
        for step, acc in evals))
    write("results.json", json.dumps({"step": 2, "eval": {"generate_accuracy": 0.4}}))
  return 0


def test_fine_tuning_records_are_read_from_generation_and_reported(tmp_path):
  out = str(tmp_path / "out")
  results = str(tmp_path / "t5_objectives.md")
  assert cli.main(["t5_objectives", "--scale=tiny", f"--out={out}", f"--results={results}"],
                  execute=_fake) == 0
  cells = grid.cells(t5.OBJECTIVES, "tiny", out)
  assert [c.key for c in cells] == ["corpus", "pretrain/span_corruption",
                                    "finetune/span_corruption/sst2/seed0"]
  record = cells[-1].record()
  assert record["eval"]["dev"] == {"accuracy": pytest.approx(0.5)}  # generated text only
  assert record["eval"]["final"]["accuracy"] == pytest.approx(0.4)
  assert report.scores(cells, "span_corruption", t5.SST2, "dev/accuracy") == pytest.approx(
      [50.0])
  text = open(results).read()
  assert "| Span corruption | 50.0 |" in text and "SentencePiece tokens" in text
  # A run without a generation-scored evaluation is an error, not a silent blank.
  os.remove(os.path.join(cells[-1].directory, grid.MARKER))
  with pytest.raises(ValueError, match="GenerationEvaluator"):
    runner.run_cell(cells[-1], log=lambda m: None,
                    execute=lambda cell, out: open(os.path.join(cell.directory, "metrics.jsonl"),
                                                   "w").write("") and 0)


@pytest.mark.parametrize("table", TABLES, ids=lambda t: t.name)
def test_every_arm_s_paper_scale_gin_parses(table, tmp_path):
  files = cli.write_paper_configs(table, str(tmp_path))
  assert [os.path.basename(f) for f in files] == [f"{a.name}.gin" for a in table.arms]
  text = open(files[0]).read()
  assert "Trainer.num_train_steps = 262144" in text and "Trainer.batch_size = 128" in text
  assert "Trainer.sequence_length = 512" in text and "include 'models/t5_base.gin'" in text
  cli.validate_paper_configs(files)
