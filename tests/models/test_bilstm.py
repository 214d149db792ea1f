"""The BiLSTM student: its LSTM equals torch.nn.LSTM (bidirectional, packed padded
sequences), the classifier's single-sentence and siamese pair forms, padding, logical
axis names and bad shapes."""
import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch

from bertjax.models import bilstm

EMBED, HIDDEN = 7, 5
LENGTHS = [6, 3, 1, 4]


def _padded_batch(rng, vocab=30, length=6):
  ids = np.zeros((len(LENGTHS), length), np.int32)
  for row, n in enumerate(LENGTHS):
    ids[row, :n] = rng.integers(1, vocab, n)
  return ids, (ids != 0).astype(np.int32)


def test_lstm_equals_torch_bidirectional_lstm_on_packed_padded_rows():
  rng = np.random.default_rng(0)
  torch.manual_seed(0)
  reference = torch.nn.LSTM(EMBED, HIDDEN, batch_first=True, bidirectional=True)
  with torch.no_grad():
    for p in reference.parameters():
      p.normal_(0.0, 0.5)
  x = rng.normal(size=(len(LENGTHS), 6, EMBED)).astype(np.float32)
  mask = (np.arange(6)[None] < np.array(LENGTHS)[:, None]).astype(np.int32)
  packed = torch.nn.utils.rnn.pack_padded_sequence(torch.tensor(x), LENGTHS, batch_first=True,
                                                   enforce_sorted=False)
  with torch.no_grad():
    out, (h_n, _) = reference(packed)
  out, _ = torch.nn.utils.rnn.pad_packed_sequence(out, batch_first=True, total_length=6)

  def params(suffix):  # torch: [4H, E] rows (i, f, g, o); ours: [E, 4, H]
    get = lambda name: getattr(reference, name + suffix).detach().numpy()
    return {"input_kernel": get("weight_ih").reshape(4, HIDDEN, EMBED).transpose(2, 0, 1),
            "recurrent_kernel": get("weight_hh").reshape(4, HIDDEN, HIDDEN).transpose(2, 0, 1),
            "bias": (get("bias_ih") + get("bias_hh")).reshape(4, HIDDEN)}

  forward = bilstm.LSTM(HIDDEN).apply({"params": params("_l0")}, x, mask)
  backward = bilstm.LSTM(HIDDEN, reverse=True).apply({"params": params("_l0_reverse")}, x, mask)
  np.testing.assert_allclose(np.concatenate([forward[0], backward[0]], -1), out.numpy(),
                             atol=1e-5)
  np.testing.assert_allclose(forward[1], h_n[0].numpy(), atol=1e-5)
  np.testing.assert_allclose(backward[1], h_n[1].numpy(), atol=1e-5)


def _init(config, ids):
  module = bilstm.BiLSTMClassifier(config)
  return module, module.init(jax.random.key(1), jnp.asarray(ids))


@pytest.mark.parametrize("pooling", bilstm.POOLINGS)
def test_single_sentence_shapes_and_padding_does_not_matter(pooling):
  config = bilstm.BiLSTMConfig(vocab_size=30, num_labels=3, embedding_size=EMBED,
                               hidden_size=HIDDEN, mlp_size=6, pooling=pooling)
  ids, mask = _padded_batch(np.random.default_rng(2))
  module, variables = _init(config, ids)
  out = module.apply(variables, ids, mask)
  assert out["logits"].shape == (4, 3) and out["sentence"].shape == (4, 2 * HIDDEN)
  wider = np.pad(ids, ((0, 0), (0, 5)))
  np.testing.assert_allclose(module.apply(variables, wider)["logits"], out["logits"], atol=1e-6)
  # Each row alone gives the same logits as in the batch.
  alone = module.apply(variables, ids[2:3, :LENGTHS[2]])["logits"]
  np.testing.assert_allclose(alone, out["logits"][2:3], atol=1e-6)


def test_siamese_pair_classifier_reads_h1_h2_product_and_difference():
  config = bilstm.tang_et_al(30, num_labels=2, pair=True, embedding_size=EMBED,
                             hidden_size=HIDDEN, mlp_size=6)
  rng = np.random.default_rng(3)
  a, _ = _padded_batch(rng)
  b, _ = _padded_batch(rng)
  pairs = np.stack([a, b], axis=1)  # [B, 2, L]
  module, variables = _init(config, pairs)
  out = module.apply(variables, pairs)
  assert out["logits"].shape == (4, 2) and out["sentence"].shape == (4, 2, 2 * HIDDEN)
  params = variables["params"]
  encoder = bilstm.BiLSTMEncoder(config)
  h1 = encoder.apply({"params": params["encoder"]}, a, (a != 0))["sentence"]
  h2 = encoder.apply({"params": params["encoder"]}, b, (b != 0))["sentence"]
  features = jnp.concatenate([h1, h2, h1 * h2, jnp.abs(h1 - h2)], -1)
  dense = lambda p, x: x @ nn.unbox(p["kernel"]) + nn.unbox(p["bias"])
  logits = dense(params["logits"], jax.nn.relu(dense(params["hidden"], features)))
  np.testing.assert_allclose(out["logits"], logits, atol=1e-5)
  assert params["hidden"]["kernel"].value.shape == (4 * 2 * HIDDEN, 6)


def test_every_parameter_has_logical_axis_names_and_the_papers_sizes():
  config = bilstm.tang_et_al(1000)
  abstract = jax.eval_shape(lambda: bilstm.BiLSTMClassifier(config).init(
      jax.random.key(0), jnp.zeros((1, 4), jnp.int32)))["params"]
  leaves = jax.tree.leaves(abstract, is_leaf=lambda x: isinstance(x, nn.Partitioned))
  assert all(isinstance(leaf, nn.Partitioned) and len(leaf.names) == leaf.value.ndim
             for leaf in leaves)
  shapes = jax.tree.map(lambda x: x.shape, nn.unbox(abstract))
  assert shapes["encoder"]["embedding"]["embedding"] == (1000, 300)
  assert shapes["encoder"]["forward"]["recurrent_kernel"] == (150, 4, 150)
  assert shapes["hidden"]["kernel"] == (300, 200)


def test_wrong_input_rank_names_the_expected_layout():
  single = bilstm.BiLSTMConfig(vocab_size=10, embedding_size=4, hidden_size=3, mlp_size=3)
  with pytest.raises(ValueError, match=r"\[batch, length\].*got shape \(2, 2, 3\)"):
    _init(single, np.ones((2, 2, 3), np.int32))
  pair = bilstm.BiLSTMConfig(vocab_size=10, embedding_size=4, hidden_size=3, mlp_size=3,
                             pair=True)
  with pytest.raises(ValueError, match=r"sentence pair"):
    _init(pair, np.ones((2, 3), np.int32))
  with pytest.raises(ValueError, match="pooling"):
    bilstm.BiLSTMConfig(vocab_size=10, pooling="mean")
