"""ELECTRA's Table 5 ablations, each by its defining property: ELECTRA 15% scores the masked
positions only; Replace MLM's network never sees [MASK] and is scored where masked;
All-Tokens MLM is scored on every real token through the copy mixture."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bertjax.models import bert, electra
from bertjax.objectives import mlm as mlm_objective, replaced_mlm, rtd
from tests.helpers import trainer as tl

MASK = 4  # tl.SyntheticMlmNsp writes [MASK] as id 4
CFG = electra.ElectraConfig(vocab_size=tl.VOCAB, embedding_size=16, hidden_size=32, num_layers=1,
                            num_heads=2, intermediate_size=48, max_position_embeddings=32,
                            generator_fraction=0.5)


def _batch():
  batch = next(iter(tl.SyntheticMlmNsp("t", "train", 4, 16, seed=3)))
  batch["attention_mask"][1, 12:] = 0  # one padded row
  batch["input_ids"][1, 12:] = 0
  batch["mlm_weights"][1, 12:] = 0
  return {k: jnp.asarray(v) for k, v in batch.items()}


def _outputs(batch, seed=0):
  """Random outputs of the shapes the ELECTRA models return."""
  rng = np.random.default_rng(seed)
  shape = batch["input_ids"].shape
  corrupted = np.where(batch["mlm_weights"] > 0, rng.integers(5, tl.VOCAB, shape),
                       batch["input_ids"])
  return {"generator_logits": jnp.asarray(rng.normal(size=shape + (tl.VOCAB,)), jnp.float32),
          "logits": jnp.asarray(rng.normal(size=shape + (tl.VOCAB,)), jnp.float32),
          "discriminator_logits": jnp.asarray(rng.normal(size=shape), jnp.float32),
          "copy_logits": jnp.asarray(rng.normal(size=shape), jnp.float32),
          "corrupted_ids": jnp.asarray(corrupted, jnp.int32),
          "replaced": jnp.asarray(corrupted != np.where(batch["mlm_weights"] > 0,
                                                        batch["mlm_targets"],
                                                        batch["input_ids"]), jnp.int32)}


def _changed_where(outputs, key, where):
  """`outputs` with `key` changed at the positions `where` (token logits: one id's)."""
  x = outputs[key]
  change = 7.0 if x.ndim == where.ndim else 7.0 * jax.nn.one_hot(5, x.shape[-1])
  where = where.reshape(where.shape + (1,) * (x.ndim - where.ndim))
  return {**outputs, key: jnp.where(where, x + change, x)}


def test_electra_15_scores_only_the_masked_positions():
  batch = _batch()
  outputs = _outputs(batch)
  unmasked = batch["mlm_weights"] == 0
  for objective, count in ((rtd.ReplacedTokenDetection(detect_on="masked"),
                            batch["mlm_weights"].sum()),
                           (rtd.ReplacedTokenDetection(), batch["attention_mask"].sum())):
    loss, metrics = objective(outputs, batch)
    assert float(metrics["rtd_loss"][1]) == float(count)
    changed, _ = objective(_changed_where(outputs, "discriminator_logits", unmasked), batch)
    # ELECTRA 15% ignores what the discriminator says off the masked positions; ELECTRA not.
    assert (float(changed) == float(loss)) == (objective.detect_on == "masked")
  with pytest.raises(ValueError, match="detect_on"):
    rtd.ReplacedTokenDetection(detect_on="some")


def test_replace_mlm_is_scored_where_masked_and_all_tokens_everywhere():
  batch = _batch()
  outputs = _outputs(batch)
  unmasked = batch["mlm_weights"] == 0
  replace, all_tokens = replaced_mlm.ReplacedMLM(), replaced_mlm.ReplacedMLM(all_tokens=True)
  loss, metrics = replace(outputs, batch)
  assert float(metrics["replaced_mlm_loss"][1]) == float(batch["mlm_weights"].sum())
  assert float(replace(_changed_where(outputs, "logits", unmasked), batch)[0]) == float(loss)
  loss, metrics = all_tokens(outputs, batch)
  assert float(metrics["replaced_mlm_loss"][1]) == float(batch["attention_mask"].sum())
  assert float(all_tokens(_changed_where(outputs, "logits", unmasked), batch)[0]) != float(loss)
  # Both add the generator's MLM loss on the masked positions, with weight 1.
  mean = lambda m, k: float(m[k][0] / m[k][1])
  np.testing.assert_allclose(float(loss), mean(metrics, "mlm_loss")
                             + mean(metrics, "replaced_mlm_loss"), rtol=1e-6)
  with pytest.raises(ValueError, match="ElectraAllTokensMLM"):
    all_tokens({k: v for k, v in outputs.items() if k != "copy_logits"}, batch)


def test_copy_mixture_matches_its_definition():
  rng = np.random.default_rng(1)
  logits = rng.normal(size=(2, 3, 5)).astype(np.float32)
  copy = rng.normal(size=(2, 3)).astype(np.float32) * 2
  inputs = np.array([[1, 2, 3], [4, 0, 1]])
  targets = np.array([[1, 4, 3], [4, 2, 2]])  # copyable where equal to the input
  weights = np.array([[1, 1, 1], [1, 1, 0]], np.float32)
  loss_sum, correct, count = replaced_mlm.copy_mixture_loss(logits, copy, inputs, targets,
                                                            weights)
  d = 1 / (1 + np.exp(-copy))
  softmax = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
  mixture = (1 - d)[..., None] * softmax + d[..., None] * np.eye(5)[inputs]
  p = np.take_along_axis(mixture, targets[..., None], -1)[..., 0]
  np.testing.assert_allclose(float(loss_sum), (-np.log(p) * weights).sum(), rtol=1e-5)
  assert float(count) == 5
  assert float(correct) == ((mixture.argmax(-1) == targets) * weights).sum()
  # A sure copy costs nothing on an unchanged token, and leaves a replaced one to the softmax.
  sure = np.full((2, 3), 30.0, np.float32)
  per_token = lambda c, w: float(replaced_mlm.copy_mixture_loss(logits, c, inputs, targets,
                                                                w)[0])
  assert per_token(sure, np.array([[1, 0, 0], [0, 0, 0]], np.float32)) < 1e-6
  assert per_token(sure, np.array([[0, 1, 0], [0, 0, 0]], np.float32)) > 25.0


def test_the_network_reads_generator_samples_never_mask():
  model = electra.ElectraReplacedMLM(CFG)
  batch = _batch()
  assert int((batch["input_ids"] == MASK).sum()) == int(batch["mlm_weights"].sum()) > 0
  objective = replaced_mlm.ReplacedMLM()

  @jax.jit
  def run(batch):
    params = bert.init_params(model, jax.random.PRNGKey(0))
    out = model.apply({"params": params}, **objective.model_inputs(batch),
                      rngs={"sample": jax.random.PRNGKey(5)})
    # Fine-tuning takes the network and its MLM head, as ElectraForMaskedLM.
    again = electra.ElectraForMaskedLM(CFG).apply(
        {"params": electra.mlm_params(params)}, out["corrupted_ids"], batch["attention_mask"],
        batch["token_type_ids"])["logits"]
    return out, objective(out, batch)[0], again

  out, loss, again = run(batch)
  corrupted, masked = np.asarray(out["corrupted_ids"]), np.asarray(batch["mlm_weights"]) > 0
  assert not (corrupted == MASK).any()
  np.testing.assert_array_equal(corrupted[~masked], np.asarray(batch["input_ids"])[~masked])
  assert out["logits"].shape == batch["input_ids"].shape + (tl.VOCAB,)
  assert "copy_logits" not in out and np.isfinite(float(loss))
  np.testing.assert_allclose(np.asarray(again), np.asarray(out["logits"]), atol=1e-5)
  # All-Tokens MLM is the same network with a copy head: one logit per token.
  model = electra.ElectraAllTokensMLM(CFG)
  shapes = jax.eval_shape(lambda: model.init_with_output(
      jax.random.PRNGKey(0), **objective.model_inputs(batch))[0])
  assert shapes["copy_logits"].shape == batch["input_ids"].shape


def test_max_predictions_runs_the_masked_position_heads_there_only():
  """With max_predictions the generator's head and Replace MLM's network head run at the
  gathered masked positions: the same losses as the heads run everywhere (nothing dropped
  here), logits that are the network's at those positions, All-Tokens' still everywhere."""
  batch = _batch()
  most = int(batch["mlm_weights"].sum(-1).max())
  full = _outputs(batch)
  positions = mlm_objective.masked_positions(batch["mlm_weights"], most)
  at = lambda x: jnp.take_along_axis(x, positions[..., None], axis=1)
  for all_tokens in (False, True):
    gathered = {**full, "generator_logits": at(full["generator_logits"])}
    if not all_tokens:
      gathered["logits"] = at(full["logits"])
    everywhere = replaced_mlm.ReplacedMLM(all_tokens=all_tokens)
    there = replaced_mlm.ReplacedMLM(all_tokens=all_tokens, max_predictions=most)
    want, want_metrics = everywhere(full, batch)
    got, metrics = there(gathered, batch)
    np.testing.assert_allclose(float(got), float(want), rtol=1e-6)
    assert float(metrics["mlm_dropped"][0]) == 0
    for key in ("mlm_loss", "replaced_mlm_loss", "replaced_mlm_accuracy"):
      np.testing.assert_allclose(np.asarray(metrics[key]), np.asarray(want_metrics[key]),
                                 rtol=1e-6)
  # The models: [B, P, V] logits for Replace MLM, equal to the network's own at P.
  for model, shape in ((electra.ElectraReplacedMLM(CFG), positions.shape),
                       (electra.ElectraAllTokensMLM(CFG), batch["input_ids"].shape)):
    objective = replaced_mlm.ReplacedMLM(all_tokens=model.copy_mechanism, max_predictions=most)
    params = bert.init_params(model, jax.random.PRNGKey(0))
    out = model.apply({"params": params}, **objective.model_inputs(batch),
                      rngs={"sample": jax.random.PRNGKey(5)})
    assert out["generator_logits"].shape == positions.shape + (tl.VOCAB,)
    assert out["logits"].shape == shape + (tl.VOCAB,)
    network = electra.ElectraForMaskedLM(CFG).apply(
        {"params": electra.mlm_params(params)}, out["corrupted_ids"], batch["attention_mask"],
        batch["token_type_ids"])["logits"]
    if not model.copy_mechanism:
      network = at(network)
    np.testing.assert_allclose(np.asarray(out["logits"]), np.asarray(network), atol=1e-5)
