"""FAISS flat / IVF search over embeddings, and the search CLI."""
import json
import subprocess
import sys

import numpy as np
import pytest

from bertjax.sbert import search
from tests.helpers import sbert as sbert_helpers


def _corpus(count=400, dim=16, seed=0):
  return np.random.default_rng(seed).normal(size=(count, dim)).astype(np.float32)


def _brute_force(corpus, queries, k):
  unit = lambda x: x / np.linalg.norm(x, axis=1, keepdims=True)
  scores = unit(queries) @ unit(corpus).T
  return np.argsort(-scores, axis=1)[:, :k], np.sort(scores, axis=1)[:, ::-1][:, :k]


def test_flat_index_returns_exact_cosine_neighbours():
  corpus, queries = _corpus(), _corpus(5, seed=1)
  index = search.SearchIndex.build(corpus)
  scores, ids = index.search(queries, k=7)
  expected_ids, expected_scores = _brute_force(corpus, queries, 7)
  np.testing.assert_array_equal(ids, expected_ids)
  np.testing.assert_allclose(scores, expected_scores, rtol=1e-5)


def test_ivf_index_finds_the_true_neighbours_when_probing_every_cell(tmp_path):
  corpus, queries = _corpus(800), _corpus(5, seed=1)
  index = search.SearchIndex.build(corpus, "ivf", nlist=8, nprobe=8)
  _, ids = index.search(queries, k=5)
  np.testing.assert_array_equal(ids, _brute_force(corpus, queries, 5)[0])
  index.save(str(tmp_path / "ivf.faiss"))
  reloaded = search.SearchIndex.load(str(tmp_path / "ivf.faiss"), nprobe=1)
  assert len(reloaded) == 800 and reloaded.index.nprobe == 1 and reloaded.metric == "cosine"


def test_corpus_vectors_find_themselves_first():
  corpus = _corpus()
  _, ids = search.SearchIndex.build(corpus, "ivf").search(corpus[:20], k=1)
  np.testing.assert_array_equal(ids[:, 0], np.arange(20))


def test_errors_name_the_problem():
  with pytest.raises(ValueError, match="needs at least that many vectors"):
    search.SearchIndex.build(_corpus(10), "ivf", nlist=20)
  with pytest.raises(ValueError, match="dimension 3"):
    search.SearchIndex.build(_corpus()).search(np.zeros((1, 3)), k=1)
  with pytest.raises(ValueError, match="index_type='hnsw'"):
    search.SearchIndex.build(_corpus(), "hnsw")


def test_cli_returns_top_k_lines_for_a_query(tmp_path):
  model_dir = sbert_helpers.write_tiny_bert(tmp_path / "model")
  corpus = ["a man is playing the guitar", "the dog runs on grass", "a cat", "the woman"]
  (tmp_path / "corpus.txt").write_text("\n".join(corpus) + "\n")
  result = subprocess.run(
      [sys.executable, "-m", "bertjax.search", f"--checkpoint={model_dir}",
       f"--corpus={tmp_path / 'corpus.txt'}", "--query=the dog runs on grass", "--k=2",
       "--noprogress", f"--save_index={tmp_path / 'flat.faiss'}"],
      capture_output=True, text=True, timeout=300)
  assert result.returncode == 0, result.stderr
  answer = json.loads(result.stdout.strip().splitlines()[-1])
  assert answer["neighbours"][0] == {"line": 2, "score": pytest.approx(1.0, abs=1e-4),
                                     "text": "the dog runs on grass"}
  assert len(answer["neighbours"]) == 2 and (tmp_path / "flat.faiss").exists()
