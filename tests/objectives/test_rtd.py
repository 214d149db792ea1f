"""ELECTRA's objective: the loss math (lambda, masks, no gradient through sampling) and
tiny runs under the gin configs (joint, and two-stage with a frozen generator)."""
import functools

import gin
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from bertjax import checkpoints, main
from bertjax.train import trainer
from bertjax.models import bert, electra
from bertjax.objectives import rtd
from bertjax.tools import electra_stage_two
from tests.helpers import trainer as tl

CFG = electra.ElectraConfig(vocab_size=tl.VOCAB, embedding_size=16, hidden_size=32, num_layers=2,
                            num_heads=2, intermediate_size=48, max_position_embeddings=32,
                            generator_fraction=0.5, hidden_dropout=0.0, attention_dropout=0.0)


@functools.lru_cache(maxsize=None)
def _model_and_params():
  model = electra.ElectraGeneratorDiscriminator(CFG)
  return model, jax.jit(lambda k: bert.init_params(model, k))(jax.random.PRNGKey(0))


def _batch(seed=0):
  batch = next(iter(tl.SyntheticMlmNsp("t", "train", 4, 16, seed)))
  batch["attention_mask"][1, 10:] = 0  # one padded row
  batch["input_ids"][1, 10:] = 0
  batch["mlm_weights"][1, 10:] = 0
  return {k: jnp.asarray(v) for k, v in batch.items()}


def _loss_fn(objective):
  model, _ = _model_and_params()

  def loss(params, batch, key):
    outputs = model.apply({"params": params}, **objective.model_inputs(batch),
                          rngs={"sample": key})
    return objective(outputs, batch)
  return loss


def test_loss_is_mlm_plus_lambda_times_detection():
  _, params = _model_and_params()
  batch = _batch()
  loss, metrics = jax.jit(_loss_fn(rtd.ReplacedTokenDetection()))(params, batch,
                                                                   jax.random.PRNGKey(1))
  mean = lambda name: float(metrics[name][0] / metrics[name][1])
  np.testing.assert_allclose(float(loss), mean("mlm_loss") + 50.0 * mean("rtd_loss"), rtol=1e-6)
  # The detection loss counts every real token, and only those.
  assert float(metrics["rtd_loss"][1]) == float(batch["attention_mask"].sum()) == 4 * 16 - 6
  assert float(metrics["mlm_loss"][1]) == float(batch["mlm_weights"].sum())
  assert 0.0 < mean("rtd_replaced") < 0.3


def test_detection_loss_matches_numpy_and_ignores_padding():
  rng = np.random.default_rng(0)
  logits = rng.normal(size=(2, 5)).astype(np.float32) * 3
  labels = rng.integers(0, 2, (2, 5))
  weights = np.array([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]], np.float32)
  loss_sum, correct, count, caught, replaced = rtd.detection_loss(logits, labels, weights)
  p = 1 / (1 + np.exp(-logits))
  nll = -(labels * np.log(p) + (1 - labels) * np.log(1 - p))
  np.testing.assert_allclose(float(loss_sum), (nll * weights).sum(), rtol=1e-5)
  assert float(correct) == (((logits > 0) == labels) * weights).sum() and float(count) == 8
  assert float(caught) == ((logits > 0) * labels * weights).sum()
  assert float(replaced) == (labels * weights).sum()
  # Anything at a padding position is ignored.
  changed = logits.copy()
  changed[0, 3:] = 100.0
  assert float(rtd.detection_loss(changed, labels, weights)[0]) == float(loss_sum)


def _norm(tree):
  return float(sum(jnp.abs(x).sum() for x in jax.tree.leaves(tree)))


def test_no_gradient_reaches_the_generator_through_sampling():
  _, params = _model_and_params()
  batch, key = _batch(), jax.random.PRNGKey(2)
  objective = rtd.ReplacedTokenDetection()

  def terms(p):  # [L_MLM, L_Disc], each as a mean, for one sample of replacements
    _, m = _loss_fn(objective)(p, batch, key)
    return jnp.stack([m["mlm_loss"][0] / m["mlm_loss"][1], m["rtd_loss"][0] / m["rtd_loss"][1]])

  per_term = jax.jit(jax.jacrev(terms))(params)  # every leaf gets a leading [2] axis
  mlm, disc = (jax.tree.map(lambda g, i=i: g[i], per_term) for i in range(2))
  # d(L_Disc)/d(generator) through the sampled tokens is exactly zero, so under
  # L_MLM + 50 L_Disc only the MLM term reaches the generator's own weights...
  assert _norm(disc["generator"]) == 0.0 and _norm(disc["generator_head"]) == 0.0
  assert _norm(mlm["generator"]) > 0 and _norm(mlm["generator_head"]) > 0
  # ...while the discriminator learns only from L_Disc, and the shared embeddings from both.
  assert _norm(disc["discriminator"]) > 0 and _norm(mlm["discriminator"]) == 0.0
  assert _norm(disc["embeddings"]) > 0 and _norm(mlm["embeddings"]) > 0


def test_missing_outputs_are_named():
  with pytest.raises(ValueError, match="ElectraGeneratorDiscriminator"):
    rtd.ReplacedTokenDetection()({"logits": jnp.zeros((1, 2))}, _batch())


# ----------------------------------------------------------------------------- gin runs
TINY_OVERRIDES = ("{'vocab_size': %d, 'embedding_size': 16, 'hidden_size': 32, 'num_heads': 2, "
                  "'intermediate_size': 64, 'num_layers': 2, 'max_position_embeddings': 32, "
                  "'hidden_dropout': 0.0, 'attention_dropout': 0.0, 'generator_fraction': %s}")


@pytest.fixture(autouse=True)
def _clean_gin():
  yield
  gin.clear_config()


def _train(model_dir, objective_gin, steps, fraction, *extra):
  gin.clear_config()
  main.parse_gin(["models/electra_small.gin", objective_gin, "runs/pretrain.gin"], [
      f"build_model.config_overrides = {TINY_OVERRIDES % (tl.VOCAB, fraction)}",
      "Trainer.data_fn = @SyntheticMlmNsp", f"Trainer.num_train_steps = {steps}",
      "Trainer.batch_size = 8", "Trainer.sequence_length = 16", "Trainer.log_every = 1",
      f"Trainer.checkpoint_every = {steps}", "Trainer.show_progress = False",
      "warmup_linear_decay.peak_value = 2e-3", "warmup_linear_decay.warmup_steps = 5",
      *extra])
  trainer.Trainer(model_dir=str(model_dir)).run("train")
  return tl.metrics(model_dir)


@pytest.mark.slow
def test_joint_electra_trains_under_its_gin_config(tmp_path):
  records = _train(tmp_path / "run", "objectives/electra.gin", 30, 0.5)
  keys = ("loss", "mlm_loss", "rtd_loss", "rtd_accuracy")
  first = {k: np.mean([r[k] for r in records[:3]]) for k in keys}
  last = {k: np.mean([r[k] for r in records[-3:]]) for k in keys}
  assert last["loss"] < 0.8 * first["loss"], (first, last)
  assert last["mlm_loss"] < first["mlm_loss"] and last["rtd_loss"] < first["rtd_loss"]
  assert last["rtd_accuracy"] > first["rtd_accuracy"] + 0.1, (first, last)


@pytest.mark.slow
def test_joint_training_detects_replacements_beyond_the_base_rate():
  """The detector must learn to find the generator's replacements while the generator
  trains beside it (shared embeddings, 1 x MLM + 50 x detection, clipped), not just
  the replaced share. Toy: every sequence repeats one token, so a replaced token is
  one that differs from its neighbours - found only from context, since the generator
  soon samples in-vocabulary tokens. Detection sits at its base rate for ~100-200
  steps here (also in transformers' discriminator trained alone), then rises."""
  vocab, (b, length), steps = 20, (32, 16), 300
  cfg = electra.ElectraConfig(vocab_size=vocab, embedding_size=32, hidden_size=32,
                              num_layers=1, num_heads=2, intermediate_size=64,
                              max_position_embeddings=16)
  model, objective = electra.ElectraGeneratorDiscriminator(cfg), rtd.ReplacedTokenDetection()
  rng = np.random.default_rng(0)

  def batch():
    ids = np.repeat(rng.integers(10, vocab, (b, 1)), length, axis=1)
    masked = rng.random((b, length)) < 0.15
    return {"input_ids": jnp.asarray(np.where(masked, 3, ids), jnp.int32),  # 3: [MASK]
            "attention_mask": jnp.ones((b, length), jnp.int32),
            "mlm_targets": jnp.asarray(np.where(masked, ids, 0), jnp.int32),
            "mlm_weights": jnp.asarray(masked, jnp.float32)}

  params = bert.init_params(model, jax.random.PRNGKey(0))
  tx = optax.chain(optax.clip_by_global_norm(1.0), optax.adamw(3e-3))

  def loss(params, batch, key):
    outputs = model.apply({"params": params}, **objective.model_inputs(batch),
                          deterministic=False, rngs={"sample": key, "dropout": key})
    return objective(outputs, batch)

  @jax.jit
  def step(params, opt_state, batch, key):
    (_, metrics), grads = jax.value_and_grad(loss, has_aux=True)(params, batch, key)
    updates, opt_state = tx.update(grads, opt_state, params)
    return optax.apply_updates(params, updates), opt_state, metrics

  opt_state, history = tx.init(params), []
  for i in range(steps):
    params, opt_state, metrics = step(params, opt_state, batch(), jax.random.PRNGKey(i))
    history.append(metrics)
  ratio = lambda m, k: float(m[k][0] / m[k][1])
  last = history[-20:]
  recall = np.mean([ratio(m, "rtd_recall") for m in last])
  share = np.mean([ratio(m, "rtd_replaced") for m in last])
  base_rate_loss = -(share * np.log(share) + (1 - share) * np.log(1 - share))
  assert recall > 0.5, [round(ratio(m, "rtd_recall"), 2) for m in history[::25]]
  assert np.mean([ratio(m, "rtd_loss") for m in last]) < 0.5 * base_rate_loss


@pytest.mark.slow
def test_two_stage_electra_freezes_the_generator(tmp_path):
  _train(tmp_path / "one", "objectives/electra_two_stage_generator.gin", 10, 1.0)
  stage_one, _ = checkpoints.load_params(str(tmp_path / "one"))
  electra_stage_two.prepare_second_stage(str(tmp_path / "one"), str(tmp_path / "init"))
  init, _ = checkpoints.load_params(str(tmp_path / "init"))
  same = lambda a, b: all(jax.tree.leaves(jax.tree.map(np.array_equal, a, b)))
  assert same(init["discriminator"], stage_one["generator"])

  records = _train(tmp_path / "two", "objectives/electra_two_stage_discriminator.gin", 20, 1.0,
                   f"INIT_CHECKPOINT = '{tmp_path / 'init'}'")
  stage_two, _ = checkpoints.load_params(str(tmp_path / "two"))
  assert same(stage_two["generator"], init["generator"])
  assert same(stage_two["generator_head"], init["generator_head"])
  assert not same(stage_two["discriminator"], init["discriminator"])
  assert records[-1]["rtd_loss"] < records[0]["rtd_loss"]
  assert records[-1]["rtd_accuracy"] > records[0]["rtd_accuracy"]


# ------------------------------------------------------------ max_predictions (gathered)
def test_sampling_at_gathered_positions_matches_sampling_everywhere():
  """With certain (one-hot, huge) logits the sample is fixed, so gathering changes
  nothing at the gathered positions; a masked position past them gets its original."""
  rng = np.random.default_rng(0)
  vocab, (b, length) = 20, (2, 8)
  ids = rng.integers(3, vocab, (b, length)).astype(np.int32)
  weights = np.zeros((b, length), np.float32)
  weights[0, [1, 4, 6]] = 1.0
  weights[1, [2]] = 1.0
  targets = (rng.integers(3, vocab, (b, length)) * weights).astype(np.int32)
  choice = rng.integers(0, vocab, (b, length))
  full_logits = 1e4 * np.eye(vocab, dtype=np.float32)[choice]
  key = jax.random.PRNGKey(0)
  corrupted, replaced = electra.sample_replacements(key, full_logits, ids, targets, weights)
  positions = jnp.asarray([[1, 4], [2, 0]])  # row 0 drops position 6; row 1 pads with 0
  gathered_logits = jnp.take_along_axis(jnp.asarray(full_logits), positions[..., None], 1)
  g_corrupted, g_replaced = electra.sample_replacements(key, gathered_logits, ids, targets,
                                                        weights, positions)
  sampled = [(0, 1), (0, 4), (1, 2)]
  for row, col in sampled:
    assert int(g_corrupted[row, col]) == int(corrupted[row, col]) == choice[row, col]
    assert int(g_replaced[row, col]) == int(replaced[row, col])
  # The dropped masked position holds its original token, not replaced.
  assert int(g_corrupted[0, 6]) == targets[0, 6] and int(g_replaced[0, 6]) == 0
  # Everything else is the input as it was.
  untouched = np.ones((b, length), bool)
  for row, col in sampled + [(0, 6)]:
    untouched[row, col] = False
  np.testing.assert_array_equal(np.asarray(g_corrupted)[untouched], ids[untouched])
  assert not np.asarray(g_replaced)[untouched].any()


def test_max_predictions_keeps_the_generator_loss_and_counts_what_it_drops():
  _, params = _model_and_params()
  batch = _batch()
  per_row = np.asarray(batch["mlm_weights"].sum(1))
  key = jax.random.PRNGKey(1)
  _, full = _loss_fn(rtd.ReplacedTokenDetection())(params, batch, key)
  # Room for every selected token: the same generator loss (it does not depend on the sample).
  _, wide = _loss_fn(rtd.ReplacedTokenDetection(max_predictions=16))(params, batch, key)
  for name in ("mlm_loss", "mlm_accuracy"):
    np.testing.assert_allclose(np.asarray(wide[name]), np.asarray(full[name]), rtol=1e-5)
  assert float(wide["mlm_dropped"][0]) == 0.0
  # Two a row: the rest are dropped from L_MLM, and ELECTRA 15% scores only the two.
  narrow = rtd.ReplacedTokenDetection(max_predictions=2, detect_on="masked")
  _, few = _loss_fn(narrow)(params, batch, key)
  kept = np.minimum(per_row, 2).sum()
  assert per_row.max() > 2
  assert float(few["mlm_loss"][1]) == kept == float(few["rtd_loss"][1])
  assert float(few["mlm_dropped"][0]) == per_row.sum() - kept
  outputs = _model_and_params()[0].apply({"params": params}, **narrow.model_inputs(batch),
                                         rngs={"sample": key})
  assert outputs["generator_logits"].shape == (4, 2, tl.VOCAB)
  assert int(outputs["replaced"].sum(1).max()) <= 2


def test_no_gradient_through_sampling_at_gathered_positions():
  _, params = _model_and_params()
  objective = rtd.ReplacedTokenDetection(max_predictions=3)
  disc_term = lambda p: (lambda m: m["rtd_loss"][0] / m["rtd_loss"][1])(
      _loss_fn(objective)(p, _batch(), jax.random.PRNGKey(2))[1])
  grads = jax.jit(jax.grad(disc_term))(params)
  assert _norm(grads["generator"]) == 0.0 and _norm(grads["generator_head"]) == 0.0
  assert _norm(grads["discriminator"]) > 0


def test_packed_examples_do_not_attend_across_each_other():
  """The electra recipe packs (EncoderFeatureConverter): two examples in one row, told apart
  by segment_ids with positions restarting, give what each gives alone through the
  objective's model inputs (nothing masked, so nothing is replaced)."""
  model, params = _model_and_params()
  rng = np.random.default_rng(0)
  a, b = rng.integers(5, tl.VOCAB, 6), rng.integers(5, tl.VOCAB, 7)

  def rows(*examples):
    out = {k: np.zeros((1, 16), np.int32) for k in
           ("input_ids", "attention_mask", "token_type_ids", "position_ids", "segment_ids",
            "mlm_targets")}
    start = 0
    for segment, ids in enumerate(examples, 1):
      span = slice(start, start + len(ids))
      out["input_ids"][0, span], out["segment_ids"][0, span] = ids, segment
      out["position_ids"][0, span], out["attention_mask"][0, span] = np.arange(len(ids)), 1
      start += len(ids)
    out["mlm_weights"] = np.zeros((1, 16), np.float32)
    return out

  def logits(batch):
    inputs = rtd.ReplacedTokenDetection().model_inputs(batch)
    assert {"segment_ids", "position_ids"} <= set(inputs)
    return np.asarray(model.apply({"params": params}, **inputs,
                                  rngs={"sample": jax.random.PRNGKey(0)})["discriminator_logits"])

  packed = logits(rows(a, b))[0]
  np.testing.assert_allclose(packed[:6], logits(rows(a))[0, :6], atol=1e-5)
  np.testing.assert_allclose(packed[6:13], logits(rows(b))[0, :7], atol=1e-5)
