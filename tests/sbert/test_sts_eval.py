"""STS readers and the Spearman x 100 protocol (bertjax/evaluation/sts.py)."""
import numpy as np
import pytest
import scipy.stats

from bertjax import paths
from bertjax.evaluation import sts


def _needs(folder):
  if not (paths.data_dir() / folder).exists():
    pytest.skip(f"{paths.data_dir() / folder} is absent")


def test_stsbenchmark_has_the_official_row_counts():
  _needs("stsbenchmark")
  sizes = {split: len(sts.read_stsbenchmark(split)) for split in ("train", "dev", "test")}
  assert sizes == {"train": 5749, "dev": 1500, "test": 1379}
  test = sts.read_stsbenchmark("test")
  assert test.sentences1[0] == "A girl is styling her hair." and test.scores[0] == 2.5


def test_sick_has_the_official_row_counts():
  _needs("sick")
  assert [len(sts.read_sick(s)) for s in ("train", "trial", "test")] == [4500, 500, 4927]


def _write_year(root, year=13):
  folder = root / "STS" / f"STS{year}-en-test"
  folder.mkdir(parents=True)
  for k, name in enumerate(sts.STS_YEARS[year]):
    (folder / f"STS.input.{name}.txt").write_text(f"a{k}\tb{k}\nc{k}\td{k}\ne{k}\tf{k}\n")
    (folder / f"STS.gs.{name}.txt").write_text(f"{k}.5\n\n4\n")  # the empty gold is dropped


def test_sts_year_reader_drops_unscored_pairs(tmp_path):
  _write_year(tmp_path)
  subsets = sts.read_sts_year(13, tmp_path)
  assert [s.name for s in subsets] == ["STS13-FNWN", "STS13-headlines", "STS13-OnWN"]
  assert subsets[1].sentences1 == ["a1", "e1"] and list(subsets[1].scores) == [1.5, 4.0]


def _fake_embed(table):
  return lambda sentences: np.stack([table[s] for s in sentences])


def test_evaluate_pairs_is_spearman_of_cosine_times_100():
  rng = np.random.default_rng(0)
  words = [f"s{i}" for i in range(30)]
  table = {w: rng.normal(size=8) for w in words}
  pairs = sts.StsPairs("toy", words[:15], words[15:], rng.uniform(0, 5, 15))
  cos = [np.dot(table[a], table[b]) / np.linalg.norm(table[a]) / np.linalg.norm(table[b])
         for a, b in zip(pairs.sentences1, pairs.sentences2)]
  expected = 100 * scipy.stats.spearmanr(cos, pairs.scores).correlation
  assert sts.evaluate_pairs(_fake_embed(table), pairs) == pytest.approx(expected, abs=1e-9)


def test_evaluate_all_covers_every_set_present(tmp_path):
  _write_year(tmp_path)
  rng = np.random.default_rng(0)
  table = {f"{c}{k}": rng.normal(size=4) for c in "abcdef" for k in range(3)}
  assert sorted(sts.evaluate_all(_fake_embed(table), tmp_path)) == ["STS13"]


def test_mismatched_pairs_are_rejected():
  with pytest.raises(ValueError, match="every pair needs both sentences and a score"):
    sts.StsPairs("bad", ["a"], ["b", "c"], np.zeros(1))
