"""The README's benchmark commands (## Performance), run as written with tiny models and
one round appended: the side-by-side train step and the GPU script (on CPU here, which
skips the cudnn row), each writing its markdown table; and the GPU profile, which on a CPU
reads the XLA thunks in place of GPU ops."""
import re
import shlex
import sys

import pytest

from bertjax import paths
from tests import test_readme

sys.path.insert(0, str(paths.REPO_ROOT / "benchmarks"))
import gpu_profile  # noqa: E402
import gpu_step  # noqa: E402
import profile_step  # noqa: E402
import side_by_side  # noqa: E402

README = "README.md"  # the commands below are read from it
TINY = {"python benchmarks/side_by_side.py": [
            "--tiny", "--cases=bert-mini/mp20,electra-small/mp20/unroll,t5-small", "--rounds=1",
            "--batch_size=8", "--sequence_length=16", "--matmul_size=64"],
        "python benchmarks/profile_step.py": [
            "--case=bert-mini", "--tiny", "--steps=1", "--top=5", "--batch_size=8",
            "--sequence_length=16"],
        "python benchmarks/gpu_step.py": [
            "--tiny", "--rounds=1", "--steps=1", "--batch_size=8", "--sequence_length=16"]}


def _readme_args(module: str) -> list[str]:
  commands = [c for c in test_readme.all_shell_commands() if test_readme.module_of(c) == module]
  assert commands, f"{README} shows no `{module}` command"
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
  gpu_profile.main(["--tiny", "--steps=1", "--top=5", "--batch_size=8", "--sequence_length=16",
                    "--variants=float32:xla", "--torch=float32"])
  ours = (tmp_path / "profile_float32_xla.md").read_text()
  theirs = (tmp_path / "profile_torch_float32.md").read_text()
  assert "ENTRY" in (tmp_path / "profile_float32_xla.hlo.txt").read_text()
  rows = {}
  for side, table in (("ours", ours), ("theirs", theirs)):
    rows[side] = [l.split(" | ") for l in table.splitlines() if l.startswith("| ")
                  and "---" not in l and not l.startswith(("| op ", "| kind "))]
    assert len(rows[side]) >= 6, table  # the top ops, then the kinds they group into
    assert all(float(r[-2]) >= 0 for r in rows[side]), table
  # Our ops are named by what the optimized HLO says they compute (fusion(dot), copy...).
  assert any(r[1].strip() for r in rows["ours"][:5]), ours
