"""ELMo: the LSTM with projection equals torch.nn.LSTM(proj_size=...), the character CNN +
highway equals a torch equivalent, the model composes them as the paper says (residual
between layers, one softmax for both directions), and bad input fails naming what
disagrees."""
import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch

from bertjax.models import elmo
from bertjax import characters
from bertjax.models.elmo.char_cnn import CharacterEncoder
from bertjax.models.elmo.lstm import LstmWithProjection
from bertjax.train import partitioning

IN, CELLS, PROJ = 11, 13, 7
LENGTHS = [6, 4, 1]


def _redraw(params, seed: int, std: float = 0.3):
  leaves, tree = jax.tree.flatten(params)
  keys = jax.random.split(jax.random.key(seed), len(leaves))
  return tree.unflatten([std * jax.random.normal(k, l.shape) for k, l in zip(keys, leaves)])


def _mask(lengths, length):
  return (np.arange(length)[None] < np.asarray(lengths)[:, None]).astype(np.int32)


def _lstm(reverse=False, cell_clip=None, proj_clip=None):
  module = LstmWithProjection(CELLS, PROJ, cell_clip, proj_clip, reverse=reverse)
  x = np.random.default_rng(0).normal(size=(3, 6, IN)).astype(np.float32)
  mask = _mask(LENGTHS, 6)
  params = _redraw(nn.unbox(module.init(jax.random.key(0), x, mask)["params"]), 1)
  return module, params, x, mask


@pytest.mark.parametrize("reverse", [False, True])
def test_lstm_with_projection_equals_torch(reverse):
  module, p, x, mask = _lstm(reverse)
  ours = np.asarray(module.apply({"params": p}, x, mask))
  lstm = torch.nn.LSTM(IN, CELLS, proj_size=PROJ, batch_first=True, bidirectional=True)
  suffix = "_l0_reverse" if reverse else "_l0"
  weights = {  # ours: [in, gate, cell] with torch's gate order i, f, g, o
      "weight_ih": np.asarray(p["input_kernel"]).transpose(1, 2, 0).reshape(4 * CELLS, IN),
      "weight_hh": np.asarray(p["recurrent_kernel"]).transpose(1, 2, 0).reshape(4 * CELLS, PROJ),
      "bias_ih": np.asarray(p["bias"]).reshape(-1), "bias_hh": np.zeros(4 * CELLS, np.float32),
      "weight_hr": np.asarray(p["projection_kernel"]).T}
  with torch.no_grad():
    for name, value in weights.items():
      getattr(lstm, name + suffix).copy_(torch.tensor(value))
    packed = torch.nn.utils.rnn.pack_padded_sequence(torch.tensor(x), LENGTHS, batch_first=True)
    out, _ = lstm(packed)
    out, _ = torch.nn.utils.rnn.pad_packed_sequence(out, batch_first=True, total_length=6)
  theirs = out.numpy()[..., PROJ:] if reverse else out.numpy()[..., :PROJ]
  np.testing.assert_allclose(ours, theirs, atol=1e-5)
  assert np.abs(ours).max() > 0.1 and not ours[2, 1:].any()  # padding outputs zeros


def _numpy_lstm(p, x, mask, cell_clip, proj_clip):
  """The released model's step (AllenNLP's LstmCellWithProjection), forward direction."""
  sigmoid = lambda z: 1 / (1 + np.exp(-z))
  w_x, w_h, w_p = (np.asarray(p[k], np.float64) for k in
                   ("input_kernel", "recurrent_kernel", "projection_kernel"))
  cell, hidden = np.zeros((x.shape[0], CELLS)), np.zeros((x.shape[0], PROJ))
  out = np.zeros((x.shape[0], x.shape[1], PROJ))
  for t in range(x.shape[1]):
    gates = (np.einsum("bi,igc->bgc", x[:, t], w_x) + np.einsum("bp,pgc->bgc", hidden, w_h)
             + np.asarray(p["bias"]))
    i, f, o = sigmoid(gates[:, 0]), sigmoid(gates[:, 1]), sigmoid(gates[:, 3])
    g = np.tanh(gates[:, 2])
    new_cell = np.clip(f * cell + i * g, -cell_clip, cell_clip)
    new_hidden = np.clip((o * np.tanh(new_cell)) @ w_p, -proj_clip, proj_clip)
    real = mask[:, t, None] > 0
    cell, hidden = np.where(real, new_cell, cell), np.where(real, new_hidden, hidden)
    out[:, t] = np.where(real, new_hidden, 0)
  return out


def test_cell_and_projection_clipping_as_the_released_model():
  module, p, x, mask = _lstm(cell_clip=0.4, proj_clip=0.25)
  p = jax.tree.map(lambda v: 3 * v, p)  # large weights: the clips bind
  ours = np.asarray(module.apply({"params": p}, x * 3, mask))
  np.testing.assert_allclose(ours, _numpy_lstm(p, x * 3, mask, 0.4, 0.25), atol=1e-5)
  assert np.isclose(np.abs(ours).max(), 0.25)


class TorchCharacterEncoder(torch.nn.Module):
  """The char CNN in torch: Conv1d + max-pool + ReLU per width, highway, projection."""

  def __init__(self, p, filters, num_highway):
    super().__init__()
    t = lambda a: torch.nn.Parameter(torch.tensor(np.asarray(a)))
    self.table = t(p["char_embeddings"]["embedding"])
    self.convs = torch.nn.ModuleList()
    for i, (width, number) in enumerate(filters):
      conv = torch.nn.Conv1d(self.table.shape[1], number, width)
      conv.weight = t(np.asarray(p[f"conv_{i}_kernel"]).transpose(2, 1, 0))
      conv.bias = t(p[f"conv_{i}_bias"])
      self.convs.append(conv)
    linear = lambda q, bias=True: self._linear(q, bias)
    self.highways = [(linear(p[f"highway_{i}"]["nonlinear"]),
                      linear(p[f"highway_{i}"]["gate"], False), t(p[f"highway_{i}"]["gate_bias"]))
                     for i in range(num_highway)]
    self.projection = linear(p["projection"])

  @staticmethod
  def _linear(q, bias):
    kernel = np.asarray(q["kernel"])
    layer = torch.nn.Linear(*kernel.shape, bias=bias)
    layer.weight = torch.nn.Parameter(torch.tensor(kernel.T))
    if bias:
      layer.bias = torch.nn.Parameter(torch.tensor(np.asarray(q["bias"])))
    return layer

  def forward(self, ids):
    batch, length, chars = ids.shape
    x = self.table[ids.reshape(-1, chars)].transpose(1, 2)  # [B * L, E, C]
    x = torch.cat([torch.relu(conv(x).max(dim=-1).values) for conv in self.convs], dim=-1)
    for nonlinear, gate, gate_bias in self.highways:
      carry = torch.sigmoid(gate(x) + gate_bias)
      x = carry * x + (1 - carry) * torch.relu(nonlinear(x))
    return self.projection(x).reshape(batch, length, -1)


def test_character_cnn_and_highway_equal_torch():
  filters = ((1, 5), (2, 3), (4, 6))
  encoder = CharacterEncoder(characters.VOCAB_SIZE, 6, filters, 2, 9)
  ids = characters.batch_ids([["Hello", "wörld", "!"], ["a" * 60]], 5, max_characters=12)
  p = _redraw(nn.unbox(encoder.init(jax.random.key(0), ids)["params"]), 2)
  ours = np.asarray(encoder.apply({"params": p}, ids))
  with torch.no_grad():
    theirs = TorchCharacterEncoder(p, filters, 2)(torch.tensor(ids, dtype=torch.long)).numpy()
  np.testing.assert_allclose(ours, theirs, atol=1e-5)
  assert np.abs(ours).std() > 0.1


def test_the_model_composes_cnn_residual_lstms_and_one_softmax():
  cfg = elmo.elmo_tiny(num_layers=3)
  model = elmo.ElmoBiLM(cfg)
  ids = characters.batch_ids([["The", "cat", "sat"], ["Hi"]], 6)
  p = _redraw(elmo.init_params(model, jax.random.key(0)), 3, 0.2)
  out = model.apply({"params": p}, ids)
  mask = ids.any(-1).astype(np.int32)
  encoder = CharacterEncoder(cfg.char_vocab_size, cfg.char_embed_dim, cfg.filters,
                             cfg.num_highway, cfg.projection_dim)
  words = encoder.apply({"params": p["characters"]}, ids)
  words = words * mask[..., None]
  states = np.asarray(out["hidden_states"])
  assert states.shape == (4, 2, 6, 2 * cfg.projection_dim)
  np.testing.assert_allclose(states[0], np.concatenate([words, words], -1), atol=1e-5)
  inputs = {"forward": words, "backward": words}
  for layer in range(3):
    for half, direction in enumerate(("forward", "backward")):
      lstm = LstmWithProjection(cfg.cell_size, cfg.projection_dim, cfg.cell_clip, cfg.proj_clip,
                                reverse=direction == "backward")
      out_l = lstm.apply({"params": p["lstm"][f"{direction}_{layer}"]}, inputs[direction], mask)
      if layer:
        out_l = out_l + inputs[direction]
      got = states[layer + 1][..., half * cfg.projection_dim:(half + 1) * cfg.projection_dim]
      np.testing.assert_allclose(got, out_l, atol=1e-5)
      inputs[direction] = out_l
  for direction in ("forward", "backward"):  # both directions through the same softmax
    logits = inputs[direction] @ p["softmax_kernel"] + p["softmax_bias"]
    np.testing.assert_allclose(out[f"{direction}_logits"], logits, atol=1e-4)


def _count(config, softmax=False):
  shapes = jax.eval_shape(lambda: elmo.init_params(elmo.ElmoBiLM(config), jax.random.key(0)))
  return sum(int(np.prod(leaf.shape)) for path, leaf in jax.tree_util.tree_leaves_with_path(shapes)
             if softmax or "softmax" not in jax.tree_util.keystr(path))


def test_paper_size_has_the_released_models_parameters():
  cfg = elmo.elmo_original()
  assert cfg.filters == elmo.PAPER_FILTERS and cfg.num_filters == 2048
  assert (cfg.char_embed_dim, cfg.max_characters_per_word, cfg.num_highway) == (16, 50, 2)
  assert (cfg.cell_size, cfg.projection_dim, cfg.cell_clip, cfg.proj_clip) == (4096, 512, 3, 3)
  # AllenNLP lists the released "Original" ELMo at 93.6M parameters (no softmax).
  assert _count(cfg) == 93_600_864


def test_every_parameter_has_logical_axes_and_shards_over_model():
  model = elmo.ElmoBiLM(elmo.elmo_tiny())
  boxed = jax.eval_shape(lambda: elmo.init_params(model, jax.random.key(0), boxed=True))
  for path, leaf in jax.tree_util.tree_leaves_with_path(
      boxed, is_leaf=lambda x: isinstance(x, nn.LogicallyPartitioned)):
    assert isinstance(leaf, nn.LogicallyPartitioned), jax.tree_util.keystr(path)
    assert len(leaf.names) == leaf.value.ndim, jax.tree_util.keystr(path)
  mesh = partitioning.make_mesh((4, 2))
  rules = partitioning.axis_rules()
  shardings = partitioning.shardings_for(boxed, mesh, rules)
  assert tuple(shardings["lstm"]["forward_0"]["input_kernel"].spec) == (None, None, "model")
  assert tuple(shardings["softmax_kernel"].spec) == (None, "model")
  params = elmo.init_params(model, jax.random.key(0))
  ids = characters.batch_ids([["a", "b"]] * 8, 5)
  single = model.apply({"params": params}, ids)
  placed = partitioning.place(params, nn.unbox(shardings))
  with partitioning.activation_sharding(mesh, rules):
    sharded = jax.jit(lambda p, x: model.apply({"params": p}, x))(placed, jnp.asarray(ids))
  for key in ("hidden_states", "forward_logits"):
    np.testing.assert_allclose(sharded[key], single[key], atol=1e-5)


def test_character_ids_follow_the_released_scheme():
  row = characters.word_ids("hé")
  assert row[:5].tolist() == [259, 105, 196, 170, 260] and set(row[5:]) == {261}
  assert characters.word_ids("<S>")[:3].tolist() == [259, 257, 260]
  assert characters.word_ids("</S>")[:3].tolist() == [259, 258, 260]
  long_word = characters.word_ids("x" * 70)
  assert long_word[-1] == 260 and (long_word[1:49] == ord("x") + 1).all()
  assert characters.VOCAB_SIZE == 262


def test_bad_input_fails_naming_what_disagrees():
  cfg = elmo.elmo_tiny()
  model = elmo.ElmoBiLM(cfg)
  params = elmo.init_params(model, jax.random.key(0))
  with pytest.raises(ValueError, match="words of 60 characters.*max_characters_per_word"):
    model.apply({"params": params}, np.ones((1, 3, 60), np.int32))
  with pytest.raises(ValueError, match="character id 300.*char_vocab_size"):
    model.apply({"params": params}, np.full((1, 3, 50), 300, np.int32))
  with pytest.raises(ValueError, match="words of 60 characters"):  # under jit too
    jax.jit(lambda x: model.apply({"params": params}, x))(np.ones((1, 3, 60), np.int32))
  with pytest.raises(ValueError, match="char_vocab_size=100 is smaller"):
    elmo.elmo_tiny(char_vocab_size=100)
  with pytest.raises(ValueError, match="none wider than max_characters_per_word=5"):
    elmo.elmo_tiny(max_characters_per_word=5, filters=((7, 4),))
  with pytest.raises(ValueError, match="Sentence 1 has 4 words.*max_words=5"):
    characters.batch_ids([["a"], ["a", "b", "c", "d"]], 5)
  other = elmo.init_params(elmo.ElmoBiLM(elmo.elmo_tiny(cell_size=32)), jax.random.key(0))
  with pytest.raises(ValueError, match=r"cell_size=64.*lstm/forward_0/input_kernel: ckpt has "
                                       r"\(16, 4, 32\), ElmoConfig expects \(16, 4, 64\)"):
    elmo.check_params(cfg, other, "ckpt")
  elmo.check_params(cfg, params)
