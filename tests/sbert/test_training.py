"""SBERT training data and a few real optimizer steps of every objective on a tiny BERT."""
import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bertjax.train import optimizers, step as train_step
from bertjax import paths
from bertjax.sbert import data as sbert_data, io as sbert_io
from bertjax.models import bert
from bertjax.sbert import model as sbert
from bertjax.sbert import losses as siamese
from bertjax.train.state import TrainState
from tests.helpers import sbert as sbert_helpers


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
  root = tmp_path_factory.mktemp("vocab")
  (root / "vocab.txt").write_text("\n".join(sbert_helpers.VOCAB) + "\n")
  return sbert_io.load_tokenizer(root)


NLI = sbert_data.Examples(
    [("a man is playing", "a man plays"), ("a man is playing", "a dog runs"),
     ("a man is playing", "the man is playing the guitar"), ("the cat", "a cat"),
     ("the cat", "the dog")], label=np.array([0, 2, 1, 0, 2], np.int32))


def test_batches_pad_to_a_power_of_two_and_mask_the_remainder(tokenizer):
  batches = list(sbert_data.batches(NLI, tokenizer, batch_size=2, min_length=8,
                                    shuffle=False))
  assert len(batches) == 3 == sbert_data.num_batches(NLI, 2)
  first, last = batches[0], batches[-1]
  assert first["input_ids"].shape == (2, 2, 8) and first["input_ids"][0, 0, 0] == 2  # [CLS]
  np.testing.assert_array_equal(last["weight"], [1, 0])
  np.testing.assert_array_equal(last["attention_mask"][1], 0)
  np.testing.assert_array_equal(np.concatenate([b["label"] for b in batches])[:5], NLI.label)


def test_shuffled_batches_group_lengths_and_keep_every_example_once(tokenizer):
  pairs = sbert_data.Examples([("a " * n, "b") for n in range(1, 40)],
                              score=np.arange(39, dtype=np.float32))
  batches = list(sbert_data.batches(pairs, tokenizer, batch_size=4, min_length=4,
                                    bucket_batches=10, seed=1))
  scores = np.concatenate([b["score"][b["weight"] > 0] for b in batches])
  assert sorted(scores) == list(range(39)) and batches[-1]["weight"].sum() == 3
  lengths = {b["input_ids"].shape[-1] for b in batches}
  assert all(n & (n - 1) == 0 for n in lengths) and len(lengths) > 1  # short batches stay short


def test_nli_triplets_pair_entailment_with_contradiction():
  triplets = sbert_data.nli_triplets(NLI)
  assert triplets.sentences == [("a man is playing", "a man plays", "a dog runs"),
                                ("the cat", "a cat", "the dog")]


def test_senteval_snli_reader():
  if not (paths.data_dir() / "snli_senteval").exists():
    pytest.skip("shared SNLI files are absent")
  dev = sbert_data.read_senteval_nli("dev")
  assert len(dev) == 9842 and set(np.unique(dev.label)) == {0, 1, 2}


@pytest.mark.slow
@pytest.mark.parametrize("objective,examples,num_labels", [
    (siamese.SoftmaxLoss(), NLI, 3),
    (siamese.CosineSimilarityLoss(),
     sbert_data.Examples(NLI.sentences, score=np.array([1, 0, .5, 1, 0], np.float32)), 0),
    (siamese.TripletLoss(), sbert_data.nli_triplets(NLI), 0),
    (siamese.MultipleNegativesRankingLoss(), sbert_data.nli_triplets(NLI), 0),
])
def test_train_step_lowers_each_loss_on_a_fixed_batch(tokenizer, objective, examples, num_labels):
  encoder = bert.BertModel(bert.bert_tiny(vocab_size=len(sbert_helpers.VOCAB),
                                          hidden_dropout=0.0, attention_dropout=0.0),
                           add_pooling_layer=False)
  model = sbert.SiameseModel(encoder, num_labels=num_labels)
  batch = next(sbert_data.batches(examples, tokenizer, batch_size=len(examples), shuffle=False))
  params = nn.unbox(model.init(jax.random.PRNGKey(0), **objective.model_inputs(batch))["params"])
  tx, lr = optimizers.make_optimizer(20, schedule=lambda total_steps: lambda s: 1e-3)
  state = TrainState(jnp.zeros((), jnp.int32), params, tx.init(params),
                     jax.random.key_data(jax.random.key(0)))
  step = jax.jit(train_step.make_train_step(model, objective, tx, lr))
  losses = []
  for _ in range(8):
    state, metrics = step(state, batch)
    losses.append(float(metrics["loss"][0]))
  assert losses[-1] < losses[0] and np.isfinite(losses).all()
