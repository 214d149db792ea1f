"""Head masks mean what transformers' head_mask meant; pruning removes the heads' parameters
and keeps the masked model's outputs; Michel et al. importance and the pruning curve."""
import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bertjax.analysis import heads, pruning
from bertjax.models import albert, bert
from bertjax.models.bert import tasks as bert_tasks
from bertjax.models.common import attention_maps

CONFIG = bert.BertConfig(vocab_size=50, hidden_size=24, num_layers=3, num_heads=4,
                         intermediate_size=20, max_position_embeddings=16, type_vocab_size=2)
IDS = np.random.default_rng(0).integers(1, 50, (3, 7))
MASK = (np.arange(7)[None] < np.array([[7], [5], [2]])).astype(np.int32)
HEAD_MASK = np.array([[1, 0, 1, 1], [0, 0, 0, 0], [1, 1, 0, 1]], np.float32)


def init(module, seed: int = 0):
  """Random parameters (biases and norms moved off their defaults too), under jit."""
  def draw(key):
    params = nn.unbox(module.init(key, IDS)["params"])
    leaves, tree = jax.tree.flatten(params)
    keys = jax.random.split(jax.random.fold_in(key, 1), len(leaves))
    return jax.tree.unflatten(tree, [p + 0.3 * jax.random.normal(k, p.shape)
                                     for p, k in zip(leaves, keys)])
  return jax.jit(draw)(jax.random.PRNGKey(seed))


def model():
  module = bert.BertModel(CONFIG)
  return module, init(module)


def jitted(module, **options):
  """attention_maps.apply(module, {"params": params}, ...) under jit."""
  return jax.jit(lambda params, *args, **kwargs: attention_maps.apply(
      module, {"params": params}, *args, **options, **kwargs))


def test_masked_head_equals_its_output_rows_zeroed():
  """A head masked to 0 contributes nothing: the same as zeroing its rows of the output
  projection; the recorded probabilities of the head are 0 and the others unchanged."""
  module, params = model()
  masked = jitted(module, output_attentions=True)(params, IDS, MASK, head_mask=HEAD_MASK)
  out = params["encoder"]["layers"]["attention"]["out"]
  zeroed = jax.tree.map(lambda x: x, params)
  zeroed["encoder"]["layers"]["attention"]["out"] = dict(
      out, kernel=out["kernel"] * HEAD_MASK[:, :, None, None])
  reference = jax.jit(module.apply)({"params": zeroed}, IDS, MASK)
  np.testing.assert_allclose(masked["last_hidden_state"], reference["last_hidden_state"],
                             atol=1e-5)
  probs = masked["attentions"]  # [layers, batch, heads, q, k]
  assert probs.shape == (3, 3, 4, 7, 7)
  np.testing.assert_array_equal(probs.sum(-1).min(axis=(1, 3)) > 0.99, HEAD_MASK == 1)
  assert np.abs(probs).sum(axis=(1, 3, 4))[HEAD_MASK == 0].max() == 0


def test_pruned_model_is_smaller_and_equals_the_masked_one():
  module = bert_tasks.task_model("ForSequenceClassification", CONFIG)
  params = init(module, seed=2)
  masked = jitted(module)(params, IDS, MASK, head_mask=HEAD_MASK)
  pruned = pruning.prune(module, params, HEAD_MASK)
  got = jax.jit(pruned.apply)(IDS, MASK)
  for key, value in masked.items():
    if value is not None:
      np.testing.assert_allclose(got[key], value, atol=1e-5, err_msg=key)
  assert pruned.kept == ((0, 2, 3), (), (0, 1, 3))
  full = sum(x.size for x in jax.tree.leaves(params))
  removed = int((HEAD_MASK == 0).sum()) * CONFIG.head_dim * (4 * CONFIG.hidden_size + 3)
  assert pruned.num_params() == full - removed


def test_bad_masks_and_unprunable_models_are_named():
  module, params = model()
  with pytest.raises(ValueError, match=r"head_mask has shape \(4, 3\).*3 layers x 4 heads"):
    attention_maps.apply(module, {"params": params}, IDS, head_mask=np.ones((4, 3)))
  with pytest.raises(ValueError, match=r"decoder_head_mask.*\['head_mask'\]"):
    attention_maps.apply(module, {"params": params}, IDS, decoder_head_mask=np.ones((3, 4)))
  with pytest.raises(ValueError, match=r"head_mask has shape \(3, 5\)"):
    pruning.prune(module, params, np.ones((3, 5)))
  shared = albert.AlbertModel(albert.AlbertConfig(
      vocab_size=50, embedding_size=8, hidden_size=24, num_layers=3, num_heads=4,
      intermediate_size=20, max_position_embeddings=16))
  shared_params = jax.eval_shape(shared.init, jax.random.PRNGKey(0), IDS)["params"]
  with pytest.raises(ValueError, match="shared"):
    pruning.prune(shared, shared_params, HEAD_MASK)


def loss_fn(outputs, batch):
  return jnp.mean((outputs["last_hidden_state"][:, 0, :3] - batch["target"]) ** 2)


def test_importance_is_the_mean_absolute_mask_gradient():
  module, params = model()
  batches = [{"input_ids": IDS, "attention_mask": MASK, "target": np.ones((3, 3))},
             {"input_ids": IDS[::-1], "attention_mask": MASK[::-1], "target": np.zeros((3, 3))}]
  inputs = lambda b: {"input_ids": b["input_ids"], "attention_mask": b["attention_mask"]}
  raw = heads.importance(module, params, batches, loss_fn, inputs, normalize=False)
  # Finite differences of each batch's loss in one mask entry.
  expected = np.zeros_like(raw)
  run = jitted(module)
  for batch in batches:
    loss = lambda m: loss_fn(run(params, head_mask=m, **inputs(batch)), batch)
    for l, h in [(0, 1), (2, 3)]:
      e = np.zeros((3, 4), np.float32)
      e[l, h] = 1e-2
      expected[l, h] += abs(float(loss(1 + e) - loss(1 - e)) / 2e-2)
  np.testing.assert_allclose(raw[[0, 2], [1, 3]], expected[[0, 2], [1, 3]], rtol=2e-2)
  normalized = heads.importance(module, params, batches, loss_fn, inputs)
  np.testing.assert_allclose(np.linalg.norm(normalized, axis=-1), 1.0, rtol=1e-5)


def test_pruning_curve_removes_least_important_heads_step_by_step():
  module, params = model()
  batches = lambda: [{"input_ids": IDS, "attention_mask": MASK, "target": np.ones((3, 3))}]
  inputs = lambda b: {"input_ids": b["input_ids"], "attention_mask": b["attention_mask"]}
  masks = []
  score = lambda m: (masks.append(m), float(m.sum()))[1]
  rows = heads.pruning_curve(module, params, batches, loss_fn, inputs, score, step=0.25,
                             max_fraction=0.75)
  assert [r["heads_pruned"] for r in rows] == [0, 3, 6, 9]
  assert [r["score"] for r in rows] == [12, 9, 6, 3]
  assert all(((b <= a).all()) for a, b in zip(masks, masks[1:]))  # pruned heads stay pruned
  scores = np.array([[3, 1, 2], [0.5, 9, 4]])
  np.testing.assert_array_equal(heads.prune_least_important(scores, np.ones((2, 3)), 2),
                                [[1, 0, 1], [0, 1, 1]])
  with pytest.raises(ValueError, match="step"):
    heads.pruning_curve(module, params, batches, loss_fn, inputs, score, step=0)
