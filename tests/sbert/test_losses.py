"""The four SBERT objectives against PyTorch / sentence-transformers formulas."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
import torch.nn.functional as F

from bertjax.sbert import losses as siamese


def _embeddings(batch=6, sentences=2, dim=8, seed=0):
  return np.random.default_rng(seed).normal(size=(batch, sentences, dim)).astype(np.float32)


def test_model_inputs_passes_only_encoder_features():
  batch = {"input_ids": 1, "attention_mask": 2, "label": 3, "score": 4}
  assert siamese.SoftmaxLoss().model_inputs(batch) == {"input_ids": 1, "attention_mask": 2}


def test_softmax_loss_is_cross_entropy_and_counts_accuracy():
  logits = np.random.default_rng(0).normal(size=(5, 3)).astype(np.float32)
  labels = np.array([0, 1, 2, 2, 1])
  loss, metrics = siamese.SoftmaxLoss()({"logits": logits}, {"label": labels})
  expected = F.cross_entropy(torch.tensor(logits), torch.tensor(labels)).item()
  np.testing.assert_allclose(loss, expected, rtol=1e-6)
  assert metrics["accuracy"][0] == (logits.argmax(-1) == labels).sum()
  assert metrics["loss"][1] == 5


def test_cosine_similarity_loss_is_mse_to_gold():
  emb = _embeddings()
  score = np.linspace(0, 1, 6).astype(np.float32)
  loss, _ = siamese.CosineSimilarityLoss()({"embeddings": emb}, {"score": score})
  cos = F.cosine_similarity(torch.tensor(emb[:, 0]), torch.tensor(emb[:, 1]))
  np.testing.assert_allclose(loss, F.mse_loss(cos, torch.tensor(score)).item(), rtol=1e-5)


@pytest.mark.parametrize("margin", [1.0, 5.0])
def test_triplet_loss_matches_torch(margin):
  emb = _embeddings(sentences=3)
  loss, metrics = siamese.TripletLoss(margin)({"embeddings": emb}, {})
  a, p, n = (torch.tensor(emb[:, i]) for i in range(3))
  # sentence-transformers' TripletLoss with Euclidean distance.
  expected = F.relu(F.pairwise_distance(a, p, eps=0) - F.pairwise_distance(a, n, eps=0) + margin)
  np.testing.assert_allclose(loss, expected.mean().item(), rtol=1e-5)
  assert 0 <= metrics["accuracy"][0] <= 6


def test_triplet_gradient_is_finite_when_anchor_equals_positive():
  emb = _embeddings(sentences=3)
  emb[:, 1] = emb[:, 0]
  grad = jax.grad(lambda e: siamese.TripletLoss()({"embeddings": e}, {})[0])(jnp.asarray(emb))
  assert np.isfinite(np.asarray(grad)).all()


@pytest.mark.parametrize("sentences", [2, 3])
def test_multiple_negatives_ranking_matches_sentence_transformers(sentences):
  emb = _embeddings(sentences=sentences)
  loss, metrics = siamese.MultipleNegativesRankingLoss(scale=20.0)({"embeddings": emb}, {})
  anchors = torch.tensor(emb[:, 0])
  # sentence-transformers: candidates = cat(positives, negatives), target i -> column i.
  candidates = torch.cat([torch.tensor(emb[:, i]) for i in range(1, sentences)])
  scores = 20.0 * F.normalize(anchors, dim=-1) @ F.normalize(candidates, dim=-1).T
  expected = F.cross_entropy(scores, torch.arange(6)).item()
  np.testing.assert_allclose(loss, expected, rtol=1e-5)
  assert metrics["accuracy"][1] == 6


def test_weights_mask_padding_examples_out_of_every_loss():
  emb = _embeddings(batch=4, sentences=3)
  padded = np.concatenate([emb, np.zeros_like(emb[:2])])
  batch = {"label": np.array([0, 1, 2, 0, 0, 0]), "score": np.full(6, 0.5, np.float32)}
  weighted = dict(batch, weight=np.array([1, 1, 1, 1, 0, 0], np.float32))
  real = {k: v[:4] for k, v in batch.items()}
  logits = np.random.default_rng(1).normal(size=(6, 3)).astype(np.float32)
  for objective in (siamese.SoftmaxLoss(), siamese.CosineSimilarityLoss(),
                    siamese.TripletLoss(), siamese.MultipleNegativesRankingLoss()):
    full, metrics = objective({"embeddings": padded, "logits": logits}, weighted)
    alone, _ = objective({"embeddings": emb, "logits": logits[:4]}, real)
    np.testing.assert_allclose(full, alone, rtol=1e-5, err_msg=type(objective).__name__)
    assert metrics["loss"][1] == 4
