"""The README's benchmark commands (## Performance), run as written with tiny models and
one round appended: the side-by-side train step, the GEMM rates (sizes divided by 16) and
the GPU script (on CPU here, which skips the cudnn row), each writing its markdown table; and the GPU profile, which on a CPU
reads the XLA thunks in place of GPU ops; and the whole fine-tuning side by side with
transformers' Trainer on a 2-layer random BERT, a few SST-2 rows; and the optimizer update
and embedding gradient beside torch's."""
import itertools
import json
import re
import shlex
import sys

import numpy as np
import pytest
import torch

from bertjax import paths
from tests import test_readme

sys.path.insert(0, str(paths.REPO_ROOT / "benchmarks"))
import encoder_family_throughput  # noqa: E402
import finetune_vs_transformers  # noqa: E402
import gemm_rates  # noqa: E402
import gpu_profile  # noqa: E402
import gpu_step  # noqa: E402
import long_attention  # noqa: E402
import profile_step  # noqa: E402
import side_by_side  # noqa: E402
import update_rates  # noqa: E402

TINY = {"python benchmarks/side_by_side.py": [
            "--tiny", "--cases=bert-mini/mp20,electra-small/mp20/unroll,t5-small", "--rounds=1",
            "--batch_size=8", "--sequence_length=16", "--matmul_size=64"],
        "python benchmarks/gemm_rates.py": ["--scale=16", "--rounds=1"],
        "python benchmarks/profile_step.py": [
            "--case=bert-mini", "--tiny", "--steps=1", "--top=5", "--batch_size=8",
            "--sequence_length=16"],
        "python benchmarks/gpu_step.py": [
            "--tiny", "--rounds=1", "--steps=1", "--batch_size=8", "--sequence_length=16"],
        "python benchmarks/long_attention.py": [
            "--lengths=512", "--variants=dense,modernbert", "--repeats=1"],
        "python benchmarks/encoder_family_throughput.py": [
            "--batch=1", "--length=16", "--steps=1", "--repeats=1"],
        "python benchmarks/update_rates.py": [
            "--vocab=1000", "--hidden=64", "--layers=1", "--tokens=16", "--rounds=1"],
        "python benchmarks/finetune_vs_transformers.py": [
            "--model=tiny-random", "--tasks=sst2", "--rows=16", "--eval_rows=16", "--epochs=1",
            "--batch_size=8", "--max_seq_length=16", "--skip_steps=1", "--log_every=1",
            "--inference_rows=8"]}


def _readme_args(module: str) -> list[str]:
  commands = [c for c in test_readme.all_shell_commands() if test_readme.module_of(c) == module]
  assert commands, f"README.md and docs/ show no `{module}` command"
  return shlex.split(commands[0])[2:]


@pytest.mark.slow
def test_side_by_side_writes_its_table(tmp_path, capsys):
  out = tmp_path / "table.md"
  side_by_side.main(_readme_args("python benchmarks/side_by_side.py")
                    + TINY["python benchmarks/side_by_side.py"] + [f"--out={out}"])
  rows = [l for l in out.read_text().splitlines() if l.startswith("| ") and "---" not in l]
  assert [r.split(" | ")[0] for r in rows[1:]] == [
      "| bert-mini/mp20", "| electra-small/mp20/unroll", "| t5-small"]
  assert "ours / torch" in capsys.readouterr().out
  # Both libraries' matmul rates, measured in the same rounds, and how they compare.
  assert re.search(r"JAX \d+ GFLOP/s, torch \d+ GFLOP/s \(JAX / torch \d+\.\d\d\)",
                   out.read_text()), out.read_text()


def test_gemm_rates_compares_every_product_both_ways(tmp_path):
  out = tmp_path / "gemm.md"
  gemm_rates.main(_readme_args("python benchmarks/gemm_rates.py")
                  + TINY["python benchmarks/gemm_rates.py"] + [f"--out={out}"])
  rows = [l.split(" | ") for l in out.read_text().splitlines()
          if l.startswith("| ") and "---" not in l][1:]
  assert [r[0][2:] for r in rows] == [name for name, *_ in gemm_rates.shapes()]
  for row in rows:  # every rate measured and positive; each ratio is its two rates'
    jax_f32, torch_f32, ratio_f32, jax_bf16, torch_bf16 = map(float, row[2:7])
    assert min(jax_f32, torch_f32, jax_bf16, torch_bf16) > 0
    # Rates print to 3 figures and ratios to 2 decimals.
    assert ratio_f32 == pytest.approx(jax_f32 / torch_f32, rel=0.03, abs=0.006)
  assert "JAX / torch time ratio" in out.read_text()


def test_gemm_shapes_are_a_bert_base_step_s_products():
  """Each projection's three forms: forward X @ W, dX = dY @ W^T and dW = X^T @ dY, with
  M x K x N as those operands give them; both libraries compute each form as numpy does."""
  by_name = {name: (form, m, k, n) for name, form, m, k, n in gemm_rates.shapes()}
  for layer in ("attention projection", "FFN in", "FFN out"):
    _, m, k, n = by_name[layer]
    assert by_name[layer + " dX"] == ("nt", m, n, k)
    assert by_name[layer + " dW"] == ("tn", k, m, n)
  numpy_form = {"nn": lambda a, b: a @ b, "nt": lambda a, b: a @ b.T, "tn": lambda a, b: a.T @ b}
  for _, form, m, k, n in gemm_rates.shapes(scale=16):
    a, b = gemm_rates.operands(form, m, k, n)
    want = numpy_form[form](a.astype(np.float64), b.astype(np.float64))
    assert want.shape == (m, n)
    np.testing.assert_allclose(gemm_rates.jax_product(form)(a, b), want, rtol=1e-4, atol=1e-3)
    np.testing.assert_allclose(
        gemm_rates.torch_product(form)(torch.from_numpy(a), torch.from_numpy(b)).numpy(),
        want, rtol=1e-4, atol=1e-3)


@pytest.mark.slow
def test_profile_step_names_where_the_time_goes(tmp_path, capsys):
  profile_step.main(_readme_args("python benchmarks/profile_step.py")
                    + TINY["python benchmarks/profile_step.py"] + [f"--hlo_dir={tmp_path}"])
  out = capsys.readouterr().out
  tables = out.split("| kind of thunk")
  assert len(tables) == 2, out
  rows = [[l.split(" | ") for l in t.splitlines() if l.startswith("| ") and "---" not in l
           and not l.startswith(("| thunk", "| kind"))] for t in tables]
  thunks, kinds = rows
  assert len(thunks) == 5 and 1 <= len(kinds) <= 5, out
  ms = lambda r: float(r[-2])
  share = lambda r: float(r[-1].rstrip(" |%"))
  # Each kind sums its thunks: the top kind takes at least the top thunk's time.
  assert ms(kinds[0]) >= ms(thunks[0]) > 0
  assert sum(share(r) for r in kinds) <= 100.01
  (hlo,) = tmp_path.iterdir()
  assert "ENTRY" in hlo.read_text()


@pytest.mark.slow
def test_gpu_step_writes_its_table(tmp_path, monkeypatch):
  monkeypatch.setenv("OUT", str(tmp_path))
  gpu_step.main(_readme_args("python benchmarks/gpu_step.py") + TINY["python benchmarks/gpu_step.py"])
  table = (tmp_path / "gpu_step.md").read_text()
  assert "| float32 | xla |" in table and "| bfloat16 | xla |" in table


@pytest.mark.slow
def test_gpu_profile_writes_both_sides_tables(tmp_path, monkeypatch):
  monkeypatch.setenv("OUT", str(tmp_path))
  # The top 40 ops: the 8 test devices' collectives and waits, which have no HLO kind, can
  # fill a short list on a loaded machine (about 15 of them, then the fusions).
  gpu_profile.main(["--tiny", "--steps=1", "--top=40", "--batch_size=8", "--sequence_length=16",
                    "--variants=float32:xla", "--torch=float32"])
  ours = (tmp_path / "profile_float32_xla.md").read_text()
  theirs = (tmp_path / "profile_torch_float32.md").read_text()
  assert "ENTRY" in (tmp_path / "profile_float32_xla.hlo.txt").read_text()
  for table in (ours, theirs):
    for header in ("| op |", "| kind |"):  # the top ops, then the kinds they group into
      rows = _table_body(table, header)
      assert rows and all(float(r[-2]) >= 0 for r in rows), table
  # Our ops are named by what the optimized HLO says they compute (fusion(dot), copy...).
  assert any(r[1].strip() for r in _table_body(ours, "| op |")), ours


def _table_body(text: str, header: str) -> list[list[str]]:
  """The cells of each body row of the markdown table whose header starts with `header`."""
  lines = text.splitlines()
  start = next(i for i, line in enumerate(lines) if line.startswith(header))
  body = itertools.takewhile(lambda line: line.startswith("| "), lines[start + 2:])
  return [line.split(" | ") for line in body]


def test_finetune_vs_transformers_runs_both_sides_on_the_same_rows_and_steps(tmp_path,
                                                                           monkeypatch):
  """The fine-tunings run as the script runs them, each in its own process; the two
  inference workers run in this one (two start-ups fewer)."""
  in_processes = finetune_vs_transformers.run_process

  def run_process(kind, spec, work_dir, name):
    if not kind.endswith("_inference"):
      return in_processes(kind, spec, work_dir, name)
    side = kind.removesuffix("_inference")
    return {**finetune_vs_transformers.INFERENCE[side](**spec), "wall_s": 1.0}

  monkeypatch.setattr(finetune_vs_transformers, "run_process", run_process)
  out = tmp_path / "finetune.md"
  command = "python benchmarks/finetune_vs_transformers.py"
  finetune_vs_transformers.main(_readme_args(command) + TINY[command]
                                + [f"--work_dir={tmp_path}", f"--out={out}"])
  table = out.read_text()
  rows = [l.strip("| ").split(" | ") for l in table.splitlines() if l.startswith("| sst2 ")]
  assert [r[1] for r in rows] == ["transformers", "bertjax packed", "bertjax unpacked"], table
  for _, side, wall, rate, score, fill, *_ in rows:
    assert float(wall) > 0 and 0 <= float(score) <= 1 and 0 < float(fill) <= 1
    assert side == "bertjax packed" or float(rate) > 0  # 16 rows pack into one step here
  theirs, packed, unpacked = rows
  assert float(unpacked[6]) == pytest.approx(float(unpacked[3]) / float(theirs[3]), rel=0.02,
                                             abs=0.01)
  # The three processes trained the same 16 rows; unpacked for the same 2 steps as
  # transformers, timing the steps after the first; packed in fewer, fuller rows.
  results = {side: json.loads((tmp_path / f"sst2_{side}.result.json").read_text())
             for side in ("theirs", "ours_False", "ours_True")}
  assert [(results[s]["train_rows"], results[s]["steps"], results[s]["timed_steps"])
          for s in ("theirs", "ours_False")] == [(16, 2, 1)] * 2
  assert results["ours_True"]["train_rows"] == 16 and results["ours_True"]["steps"] <= 2
  assert results["ours_True"]["packing_efficiency"] >= results["ours_False"]["packing_efficiency"]
  inference = [l.strip("| ").split(" | ") for l in table.splitlines() if "pipeline |" in l]
  assert len(inference) == 2, table
  for _, wall, first, steady, rate, fill in inference:
    assert float(first) > 0 and float(steady) > 0 and 0 < float(fill) <= 1, table
    assert float(rate) == pytest.approx(8 / float(steady), rel=0.02)  # --inference_rows=8


def test_long_attention_puts_modernbert_beside_dense(tmp_path, capsys):
  long_attention.main(_readme_args("python benchmarks/long_attention.py")
                      + TINY["python benchmarks/long_attention.py"] + [f"--out={tmp_path}"])
  table = (tmp_path / "results.md").read_text()
  cells = [[c.strip() for c in r.strip("|").split("|")] for r in table.splitlines()
           if r.startswith("| ") and " | 512 | " in r]
  rows = {c[0]: c for c in cells}
  assert set(rows) == {"dense", "modernbert"}, table
  # Its local layer never forms the [L, L] scores: less peak memory than two dense layers.
  assert float(rows["modernbert"][7]) < 0.9, table
  assert (tmp_path / "long_attention.png").stat().st_size > 0
  assert "Growth exponent" in capsys.readouterr().out


@pytest.mark.slow
def test_encoder_family_throughput_times_train_and_encode_beside_bert(capsys):
  encoder_family_throughput.main(
      _readme_args("python benchmarks/encoder_family_throughput.py")
      + TINY["python benchmarks/encoder_family_throughput.py"])
  out = capsys.readouterr().out
  rows = {line.split()[0]: line.split() for line in out.splitlines()
          if line.startswith(("bert ", "modernbert "))}
  assert set(rows) == {"bert", "modernbert"}, out
  for row in rows.values():  # train tokens/s, ms/step, params, encode tokens/s: all measured
    assert float(row[-4]) > 0 and float(row[-3]) > 0 and float(row[-1]) > 0, out


def test_update_rates_times_the_update_and_the_embedding_gradient_on_both_sides(tmp_path):
  command = "python benchmarks/update_rates.py"
  out = tmp_path / "update_rates.md"
  table = update_rates.main(_readme_args(command) + TINY[command] + [f"--out={out}"])
  assert out.read_text() == table + "\n"
  # The same model on both sides: our stacked layers hold transformers' parameters.
  shapes = update_rates.parameter_shapes(1000, 64, 1)
  assert len({sum(int(np.prod(s)) for s in side) for side in shapes.values()}) == 1
  assert f"{sum(int(np.prod(s)) for s in shapes['ours']) / 1e6:.1f}M parameters" in table
  rows = {row.split("|")[1].strip(): [float(x) for x in row.split("|")[2:5]]
          for row in table.splitlines() if row.startswith("| ") and row[2].islower()
          and not row.startswith("| part")}
  assert set(rows) == {"update (clip, AdamW, schedule)", "embedding gradient (16 tokens)"}
  for ours_ms, theirs_ms, ratio in rows.values():
    assert ours_ms > 0 and theirs_ms > 0 and ratio > 0
