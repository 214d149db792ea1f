"""Seq2seq cross-entropy, and tiny T5s that learn span corruption and a text-to-text task."""
import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import seqio
import tensorflow as tf

from bertjax import batch as contract
from bertjax.train import optimizers, step as train_step
from bertjax.data import corpus, vocab_training
from bertjax.data import recipes
from bertjax.models import t5
from bertjax.objectives import seq2seq
from bertjax.train.state import TrainState


def _reference_loss(logits, labels, weights):
  logp = logits - np.log(np.exp(logits - logits.max(-1, keepdims=True)).sum(-1, keepdims=True)) \
      - logits.max(-1, keepdims=True)
  nll = -np.take_along_axis(logp, labels[..., None], -1)[..., 0]
  return (nll * weights).sum() / weights.sum()


def test_loss_is_mean_token_cross_entropy_over_label_weights():
  rng = np.random.default_rng(0)
  logits = rng.normal(size=(2, 5, 11)).astype(np.float32) * 3
  labels = rng.integers(0, 11, (2, 5)).astype(np.int32)
  weights = np.array([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]], np.float32)
  batch = {"labels": labels, "label_weights": weights}
  loss, metrics = seq2seq.Seq2SeqLM()({"logits": jnp.asarray(logits)}, batch)
  np.testing.assert_allclose(loss, _reference_loss(logits, labels, weights), rtol=1e-5)
  total, count = metrics["seq2seq_loss"]
  assert float(count) == 8.0 and np.isclose(float(total) / 8, float(loss))
  correct = ((logits.argmax(-1) == labels) * weights).sum()
  assert float(metrics["seq2seq_accuracy"][0]) == correct

  z_loss, z_metrics = seq2seq.Seq2SeqLM(z_loss=1e-2)({"logits": jnp.asarray(logits)}, batch)
  log_z = np.log(np.exp(logits.astype(np.float64)).sum(-1))
  extra = 1e-2 * (log_z ** 2 * weights).sum() / weights.sum()
  np.testing.assert_allclose(z_loss, float(loss) + extra, rtol=1e-5)
  assert "seq2seq_z_loss" in z_metrics


def test_model_inputs_pass_packing_features_only():
  batch = {k: np.zeros((1, 4), np.int32) for k in contract.SEQ2SEQ_INPUTS + ("labels",)}
  inputs = seq2seq.Seq2SeqLM().model_inputs(batch)
  assert set(inputs) == set(contract.SEQ2SEQ_INPUTS)
  assert set(contract.SEQ2SEQ_PACKING) <= set(inputs)


def tiny_t5(vocab_size: int) -> t5.T5ForConditionalGeneration:
  return t5.T5ForConditionalGeneration(t5.t5_v1_1_small(
      vocab_size=vocab_size, hidden_size=32, head_dim=8, num_heads=4, intermediate_size=64,
      num_layers=2, num_decoder_layers=2, relative_buckets=16, relative_max_distance=32))


def train(model, batches, steps: int, warmup_steps: int = 100):
  """Trains with the trainer's step, T5's Adafactor and inverse-sqrt schedule; returns
  (params, per-step losses)."""
  objective = seq2seq.Seq2SeqLM()
  first = next(batches)
  params = model.init(jax.random.PRNGKey(0), **objective.model_inputs(first))["params"]
  params = nn.unbox(params)
  schedule = optimizers.inverse_sqrt(steps, warmup_steps=warmup_steps)
  tx = optimizers.adafactor(schedule)
  state = TrainState(step=jnp.zeros((), jnp.int32), params=params, opt_state=tx.init(params),
                     rng=jax.random.key_data(jax.random.key(0)))
  step = jax.jit(train_step.make_train_step(model, objective, tx, schedule))
  losses = []
  for batch in [first] + [next(batches) for _ in range(steps - 1)]:
    state, metrics = step(state, batch)
    losses.append(float(metrics["loss"][0]))
  return state.params, losses


@pytest.fixture(scope="module")
def small_corpus(tmp_path_factory):
  """300 documents of the embedded corpus and a SentencePiece vocab with 20 sentinels."""
  documents = corpus.documents("train")[:300]
  vocab = vocab_training.train_sentencepiece(
      [s for d in documents for s in d.split("\n")], 400,
      str(tmp_path_factory.mktemp("spm")), extra_ids=20)
  source = seqio.FunctionDataSource(
      lambda split, shuffle_files, seed=None: tf.data.Dataset.from_tensor_slices(
          {"text": documents}), splits=["train"])
  return vocab, source


def test_tiny_t5_learns_span_corruption(small_corpus):
  vocab, source = small_corpus
  ds = recipes.get_dataset("t5_span_corruption", sequence_length=64, batch_size=16,
                         source=source, vocabulary=vocab, seed=0)
  batches = ds.as_numpy_iterator()
  _, losses = train(tiny_t5(vocab.vocab_size), batches, steps=40)
  assert np.isfinite(losses).all()
  assert np.mean(losses[-5:]) < np.mean(losses[:5]) - 1.0, losses


def _toy_sentiment(vocab, n: int, seed: int):
  """'sst2 sentence: ...' -> 'positive' / 'negative': the label is the polarity word hidden
  among filler words, so the model must read the input to answer."""
  rng = np.random.default_rng(seed)
  filler = "the model returns a list of values for each token in the input".split()
  polar = {"positive": ["good", "great", "fine"], "negative": ["bad", "wrong", "broken"]}
  inputs, targets, labels = [], [], []
  for _ in range(n):
    label = rng.choice(sorted(polar))
    words = list(rng.choice(filler, 6)) + [rng.choice(polar[label])]
    rng.shuffle(words)
    inputs.append(vocab.encode("sst2 sentence: " + " ".join(words)) + [vocab.eos_id])
    targets.append(vocab.encode(label) + [vocab.eos_id])
    labels.append(label)
  return inputs, targets, labels


def _pad(rows, length):
  out = np.zeros((len(rows), length), np.int32)
  for i, r in enumerate(rows):
    out[i, :len(r)] = r[:length]
  return out


def test_tiny_t5_learns_a_text_to_text_task(small_corpus):
  from bertjax.inference import decoding
  vocab, _ = small_corpus
  inputs, targets, _ = _toy_sentiment(vocab, 512, seed=0)
  enc = _pad(inputs, 24)
  labels = _pad(targets, 6)
  decoder_inputs = np.concatenate([np.zeros((len(labels), 1), np.int32), labels[:, :-1]], 1)

  def batches():
    for i in range(0, 10 ** 6, 16):
      rows = np.arange(i, i + 16) % len(enc)
      yield {"input_ids": enc[rows], "attention_mask": (enc[rows] > 0).astype(np.int32),
             "decoder_input_ids": decoder_inputs[rows], "labels": labels[rows],
             "decoder_attention_mask": (labels[rows] > 0).astype(np.int32),
             "label_weights": (labels[rows] > 0).astype(np.float32)}

  model = tiny_t5(vocab.vocab_size)
  params, losses = train(model, batches(), steps=80)
  assert np.mean(losses[-5:]) < 0.2 * np.mean(losses[:5]), losses
  test_inputs, _, test_labels = _toy_sentiment(vocab, 32, seed=1)
  ids = _pad(test_inputs, 24)
  out = decoding.generate(model, params, ids, (ids > 0).astype(np.int32),
                          model_config=model.config, max_new_tokens=5)
  predictions = [vocab.decode([t for t in row[1:] if t not in (0, vocab.eos_id)]) for row in out]
  accuracy = np.mean([p == l for p, l in zip(predictions, test_labels)])
  assert accuracy >= 0.9, list(zip(predictions, test_labels))
