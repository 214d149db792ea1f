"""Heads wrap any encoder; the fine-tuning loop loads, trains and freezes the right params."""
import dataclasses
import importlib

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bertjax.models.common import task_heads as heads
from bertjax.finetune import loop
from bertjax.objectives import downstream as objectives
from bertjax.models import bert

CFG = bert.BertConfig(vocab_size=50, num_layers=1, hidden_size=32, num_heads=2,
                     intermediate_size=64, max_position_embeddings=32)


class NoPoolerEncoder(nn.Module):
  """The minimum of the encoder interface, with no pooler (like ELECTRA / DeBERTa)."""

  @nn.compact
  def __call__(self, input_ids, attention_mask=None, token_type_ids=None, *,
               deterministic=True, output_hidden_states=False):
    h = nn.Embed(50, 16)(input_ids)
    return {"last_hidden_state": nn.Dense(16)(h), "pooler_output": None}


def _inputs(batch=2, length=6):
  ids = jnp.arange(batch * length).reshape(batch, length) % 50
  return {"input_ids": ids, "attention_mask": jnp.ones_like(ids),
          "token_type_ids": jnp.zeros_like(ids)}


@pytest.mark.parametrize("encoder", [bert.BertModel(CFG), NoPoolerEncoder()],
                         ids=["bert", "no_pooler"])
def test_heads_nest_encoder_and_head_params(encoder):
  x = _inputs()
  cases = [(heads.SequenceClassifier(encoder, num_labels=3), x, {"logits": (2, 3)}),
           (heads.SpanExtractor(encoder), x, {"start_logits": (2, 6), "end_logits": (2, 6)}),
           (heads.TokenClassifier(encoder, num_labels=9), x, {"logits": (2, 6, 9)}),
           (heads.MultipleChoice(encoder), {k: v.reshape(1, 2, 6) for k, v in x.items()},
            {"logits": (1, 2)})]
  # Shapes only (jax.eval_shape traces without compiling): cheap on a busy CPU.
  bare = jax.eval_shape(lambda: nn.unbox(encoder.init(jax.random.key(0), x["input_ids"])["params"]))
  for model, inputs, shapes in cases:
    params = jax.eval_shape(lambda: nn.unbox(model.init(jax.random.key(0), **inputs)["params"]))
    assert set(params) == {"encoder", "head"}
    # The encoder subtree is exactly what the bare encoder would own.
    shapes_of = lambda tree: jax.tree.map(lambda a: a.shape, tree)
    assert shapes_of(params["encoder"]) == shapes_of(bare)
    out = jax.eval_shape(lambda p: model.apply({"params": p}, **inputs), params)
    assert {k: v.shape for k, v in out.items()} == shapes


@pytest.mark.parametrize("family", ["albert", "electra", "deberta", "roberta", "distilbert"])
def test_heads_over_other_encoder_families(family):
  """Any family's base encoder drops in (tiny random configs of each)."""
  module = importlib.import_module(f"bertjax.models.{family}")
  prefix = {"albert": "Albert", "electra": "Electra", "deberta": "Deberta", "roberta": "Roberta",
            "distilbert": "DistilBert"}[family]
  config_cls = getattr(module, f"{prefix}Config")
  small = dict(vocab_size=50, hidden_size=16, num_layers=2, num_heads=2, intermediate_size=32,
               max_position_embeddings=32, embedding_size=16)
  names = {f.name for f in dataclasses.fields(config_cls)}
  encoder = getattr(module, f"{prefix}Model")(config_cls(**{k: v for k, v in small.items()
                                                          if k in names}))
  x = {k: v + 2 if k == "input_ids" else v for k, v in _inputs().items()}  # skip pad ids
  for model, key, shape in [(heads.SequenceClassifier(encoder, num_labels=3), "logits", (2, 3)),
                            (heads.SpanExtractor(encoder), "start_logits", (2, 6))]:
    params = jax.eval_shape(lambda: nn.unbox(model.init(jax.random.key(0), **x)["params"]))
    assert set(params) == {"encoder", "head"}
    assert jax.eval_shape(lambda p: model.apply({"params": p}, **x), params)[key].shape == shape


def test_pooling_modes():
  out = {"last_hidden_state": jnp.arange(12.0).reshape(1, 3, 4), "pooler_output": None}
  mask = jnp.array([[1, 1, 0]])
  np.testing.assert_allclose(heads.pool(out, mask, "pooler"), [[0, 1, 2, 3]])
  np.testing.assert_allclose(heads.pool(out, mask, "mean"), [[2, 3, 4, 5]])
  with pytest.raises(ValueError, match="Unknown pooling"):
    heads.pool(out, mask, "max")


def _toy_task(n=64, length=8, seed=0):
  """Label = the token after [CLS] (7 or 8): learnable by a tiny encoder in ~20 steps."""
  rng = np.random.default_rng(seed)
  ids = rng.integers(10, 50, (n, length)).astype(np.int32)
  labels = rng.integers(0, 2, n).astype(np.int32)
  ids[:, 0], ids[:, 1] = 1, 7 + labels
  return {"input_ids": ids, "attention_mask": np.ones_like(ids),
          "token_type_ids": np.zeros_like(ids), "labels": labels}


@pytest.mark.slow
def test_finetuner_loads_encoder_trains_and_freezes():
  data = _toy_task()
  encoder = bert.BertModel(CFG.replace(hidden_dropout=0.0, attention_dropout=0.0))
  pretrained = bert.init_params(encoder, jax.random.key(42))
  model = heads.SequenceClassifier(encoder, num_labels=2, dropout_rate=0.0)
  config = loop.FinetuneConfig(learning_rate=1e-2, batch_size=16, log_every=5, warmup_fraction=0.0)
  tuner = loop.Finetuner(model, objectives.Classification(), data, config, total_steps=60,
                         encoder_params=pretrained)
  jax.tree.map(np.testing.assert_array_equal, jax.device_get(tuner.params["encoder"]), pretrained)
  history = tuner.train(data, 60)  # the loss leaves ln 2 after ~20 steps, ~0 by 40
  assert history[-1]["loss"] < 0.1 < history[0]["loss"]
  logits = tuner.predict(data, ("logits",))["logits"]
  assert logits.shape == (64, 2) and np.mean(logits.argmax(-1) == data["labels"]) > 0.9

  frozen = loop.Finetuner(model, objectives.Classification(), data, config, total_steps=3,
                          encoder_params=pretrained, frozen=("^encoder/",))
  before = jax.device_get(frozen.params)
  frozen.train(data, 3)
  after = jax.device_get(frozen.params)
  jax.tree.map(np.testing.assert_array_equal, after["encoder"], before["encoder"])
  assert not np.allclose(after["head"]["out"]["kernel"], before["head"]["out"]["kernel"])


def test_train_batches_bucket_by_length_and_cover_each_epoch():
  data = _toy_task(n=40, length=64)
  data["attention_mask"][:, :] = 0
  for row, length in enumerate(np.random.default_rng(1).integers(2, 64, 40)):
    data["attention_mask"][row, :length] = 1
  data["row"] = np.arange(40)
  batches = list(loop.train_batches(data, batch_size=8, num_steps=10, seed=0, bucket_batches=5))
  assert len(batches) == 10
  for epoch in (batches[:5], batches[5:]):
    assert sorted(np.concatenate([b["row"] for b in epoch]).tolist()) == list(range(40))
  for b in batches:  # trimmed to the batch's longest row, rounded up to 32 or 64
    longest = int(b["attention_mask"].sum(1).max())
    assert b["input_ids"].shape[1] == (32 if longest <= 32 else 64)


def test_predict_pads_the_last_batch_and_keeps_order():
  data = _toy_task(n=11, length=32)
  for row in range(11):  # varied lengths: prediction runs in length order
    data["attention_mask"][row, 3 + 2 * row:] = 0
  model = heads.SequenceClassifier(bert.BertModel(CFG), num_labels=2)
  params = nn.unbox(model.init(jax.random.key(0), **{k: data[k][:1] for k in _inputs()})["params"])
  obj = objectives.Classification()
  batched = loop.predict(model, params, data, ("logits",), obj.model_inputs, batch_size=4)
  whole = model.apply({"params": params}, **obj.model_inputs(data))["logits"]
  np.testing.assert_allclose(batched["logits"], whole, atol=1e-5)


def test_regression_trains_on_the_centred_score():
  objective = objectives.Regression(center=2.5, scale=2.5)
  batch = {"input_ids": jnp.zeros((2, 4), jnp.int32), "labels": jnp.array([2.5, 5.0])}
  loss, metrics = objective({"logits": jnp.array([[0.0], [0.0]])}, batch)
  assert float(loss) == pytest.approx(0.5)  # targets 0 and 1
  assert metrics["loss"][1] == 2.0
