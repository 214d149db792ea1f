"""ELMo's bidirectional LM loss: the mean of the two directions' per-word NLLs, over the
targets the recipe writes (0 = none), and the metrics' (sum, count) per direction."""
import jax
import numpy as np
import pytest

from bertjax.objectives import bilm


def _nll(logits, targets):
  log_probs = np.asarray(jax.nn.log_softmax(logits, -1))
  real = targets > 0
  return -np.take_along_axis(log_probs, targets[..., None], -1)[..., 0][real], real


def test_loss_averages_both_directions_over_real_targets():
  rng = np.random.default_rng(0)
  outputs = {f"{d}_logits": rng.normal(size=(2, 5, 7)).astype(np.float32)
             for d in bilm.DIRECTIONS}
  batch = {"forward_targets": np.array([[3, 4, 2, 0, 0], [5, 6, 1, 2, 0]], np.int32),
           "backward_targets": np.array([[0, 1, 3, 4, 0], [0, 0, 5, 6, 1]], np.int32),
           "char_ids": np.ones((2, 5, 4), np.int32), "input_ids": np.ones((2, 5), np.int32),
           "attention_mask": np.ones((2, 5), np.int32)}
  loss, metrics = bilm.BidirectionalLM()(outputs, batch)
  means = []
  for direction in bilm.DIRECTIONS:
    nll, real = _nll(outputs[f"{direction}_logits"], batch[f"{direction}_targets"])
    total, count = metrics[f"{direction}_loss"]
    np.testing.assert_allclose(total, nll.sum(), rtol=1e-5)
    assert count == real.sum()
    means.append(nll.mean())
  np.testing.assert_allclose(loss, np.mean(means), rtol=1e-5)
  assert set(bilm.BidirectionalLM().model_inputs(batch)) == {"char_ids", "attention_mask"}
  ppl = bilm.perplexity({"forward_loss": np.log(20.0), "backward_loss": np.log(30.0)})
  np.testing.assert_allclose([ppl["forward_perplexity"], ppl["backward_perplexity"]], [20, 30])


def test_missing_targets_or_logits_fail_naming_them():
  logits = {f"{d}_logits": np.zeros((1, 3, 4), np.float32) for d in bilm.DIRECTIONS}
  with pytest.raises(ValueError, match=r"BidirectionalLM reads batch features "
                                       r"\['forward_targets', 'backward_targets'\]"):
    bilm.BidirectionalLM()(logits, {"input_ids": np.ones((1, 3), np.int32)})
  targets = {"forward_targets": np.ones((1, 3), np.int32),
             "backward_targets": np.ones((1, 3), np.int32)}
  with pytest.raises(ValueError, match="expects the model output 'backward_logits'"):
    bilm.BidirectionalLM()({"forward_logits": logits["forward_logits"]}, targets)
