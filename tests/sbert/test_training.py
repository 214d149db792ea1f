"""SBERT training data, a few real optimizer steps of every objective on a tiny BERT, and
`python -m bertjax.sbert.train` on the shared training loop."""
import json
import os
import subprocess
import sys

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bertjax.train import loop as train_loop, optimizers, partitioning, step as train_step
from bertjax import paths
from bertjax.evaluation import sts
from bertjax.sbert import data as sbert_data, io as sbert_io
from bertjax.models import bert
from bertjax.sbert import model as sbert
from bertjax.sbert import losses as siamese, train as sbert_train
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


LONGER = sbert_data.Examples(
    [("a " * (1 + i % 7) + "man", "the cat " * (1 + i % 3), "a dog " * (i % 5) + "runs")
     for i in range(11)])


@pytest.mark.parametrize("num_microbatches,row_multiple", [(1, 1), (2, 1), (2, 4)])
def test_packed_batches_hold_every_sentence_of_the_padded_batches_once(
    tokenizer, num_microbatches, row_multiple):
  """The same examples in the same batches; each sentence's tokens sit, positions from 0,
  in the row and segment its slot names, within its microbatch's rows (train.step takes
  rows / examples i, i + n, ... for microbatch i); rows per microbatch are a bucket size
  and a multiple of `row_multiple`."""
  n, size, per_row = num_microbatches, 4, sbert.SENTENCES_PER_ROW
  padded = list(sbert_data.batches(LONGER, tokenizer, size, seed=3))
  packed = list(sbert_data.packed_batches(LONGER, tokenizer, size, 64, per_row, n, row_multiple,
                                          seed=3))
  assert len(packed) == len(padded) == 3
  for p, u in zip(packed, padded):
    np.testing.assert_array_equal(p["weight"], u["weight"])
    rows = len(p["input_ids"]) // n
    assert len(p["input_ids"]) % n == 0 and rows % row_multiple == 0
    assert rows in {-(-sbert_data.row_bucket(k) // row_multiple) * row_multiple
                    for k in range(1, 9)}
    np.testing.assert_array_equal(p["attention_mask"], p["segment_ids"] > 0)
    assert p["attention_mask"].sum() == u["attention_mask"][u["weight"] > 0].sum()
    seen = set()
    real_examples = np.broadcast_to(u["weight"][:, None] > 0, p["sentence_slots"].shape)
    for b, s in zip(*np.nonzero(real_examples)):
      local_row, segment = divmod(int(p["sentence_slots"][b, s]), per_row)
      row = local_row * n + b % n  # the batch row of microbatch b % n's local row
      tokens = p["input_ids"][row][p["segment_ids"][row] == segment + 1]
      real = u["input_ids"][b, s][u["attention_mask"][b, s] > 0]
      np.testing.assert_array_equal(tokens, real)
      np.testing.assert_array_equal(p["position_ids"][row][p["segment_ids"][row] == segment + 1],
                                    np.arange(len(real)))
      seen.add((row, segment))
    assert len(seen) == int(u["weight"].sum()) * 3  # no two sentences share a slot
  if row_multiple == 1:  # (4 devices' empty rows outweigh what 4 examples save)
    efficiency = lambda batches: (sum(b["attention_mask"].sum() for b in batches) /
                                  sum(b["attention_mask"].size for b in batches))
    assert efficiency(packed[:2]) > efficiency(padded[:2])


@pytest.mark.parametrize("pooling", ["mean", "cls", "max"])
def test_packed_siamese_model_equals_the_padded_one(tokenizer, pooling):
  """Embeddings and the NLI head's logits of packed rows equal those of a padded row per
  sentence (the encoder's segment mask and restarting positions), per microbatch too."""
  encoder = bert.BertModel(bert.bert_tiny(vocab_size=len(sbert_helpers.VOCAB)),
                           add_pooling_layer=False)
  model = sbert.SiameseModel(encoder, pooling, num_labels=3,
                             sentences_per_row=sbert.SENTENCES_PER_ROW)
  pairs = sbert_data.Examples([e[:2] for e in LONGER.sentences], label=np.zeros(11, np.int32))
  padded = next(sbert_data.batches(pairs, tokenizer, 8, shuffle=False))
  packed = next(sbert_data.packed_batches(pairs, tokenizer, 8, 64, shuffle=False))
  inputs = siamese.SoftmaxLoss().model_inputs
  params = model.init(jax.random.PRNGKey(0), **inputs(padded))["params"]
  expected = model.apply({"params": params}, **inputs(padded))
  for name, value in model.apply({"params": params}, **inputs(packed)).items():
    np.testing.assert_allclose(value, expected[name], atol=1e-5, err_msg=name)
  # Two microbatches: each is packed into rows of its own, which its slots count.
  packed = next(sbert_data.packed_batches(pairs, tokenizer, 8, 64, num_microbatches=2,
                                          shuffle=False))
  micro = train_step._split_microbatches(inputs(packed), 2)
  for i in range(2):
    part = model.apply({"params": params}, **jax.tree.map(lambda x: x[i], micro))
    for name, value in part.items():
      np.testing.assert_allclose(value, expected[name][i::2], atol=1e-5, err_msg=name)


def test_row_buckets_are_powers_of_two_and_three_quarters_of_them():
  assert [sbert_data.row_bucket(n) for n in range(0, 14)] == [1, 1, 2, 3, 4, 6, 6, 8, 8, 12,
                                                              12, 12, 12, 16]


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


def _tiny_encoder():
  return bert.BertModel(bert.bert_tiny(vocab_size=len(sbert_helpers.VOCAB)),
                        add_pooling_layer=False)


@pytest.mark.slow
def test_train_stage_runs_the_shared_loop_and_writes_its_metrics(tokenizer, tmp_path):
  encoder = _tiny_encoder()
  start = nn.unbox(encoder.init(jax.random.PRNGKey(1), np.ones((1, 4), np.int32))["params"])
  lines = []
  config = sbert_train.TrainConfig(batch_size=2, learning_rate=1e-3, log_every=2,
                                   num_microbatches=2)
  trained = sbert_train.train_stage("nli", siamese.SoftmaxLoss(), NLI, 2, 3, encoder, start,
                                    tokenizer, config, lines.append, str(tmp_path))
  rows = [json.loads(l) for l in (tmp_path / "metrics.jsonl").read_text().splitlines()]
  assert [r["step"] for r in rows] == [2, 4, 6]  # 2 epochs of 3 batches
  for row in rows:
    assert row["split"] == "train" and row["nonfinite"] == 0 and row["grad_norm"] > 0
    assert np.isfinite(row["loss"]) and 0 <= row["accuracy"] <= 1 and row["learning_rate"] > 0
    assert 0 < row["packing_efficiency"] <= 1  # packed rows (TrainConfig.packing)
  assert os.listdir(tmp_path / "tensorboard" / "train")
  assert [l.split(" ")[:3] for l in lines[:3]] == [["nli", "step", "2/6"], ["nli", "step", "4/6"],
                                                   ["nli", "step", "6/6"]]
  assert lines[-1].startswith("nli: 5 examples, 2 epoch(s) capped at 6 steps")
  changed = jax.tree.map(lambda a, b: not np.array_equal(a, b), trained, start)
  assert any(jax.tree.leaves(changed))
  assert all(np.isfinite(p).all() for p in jax.tree.leaves(trained))


@pytest.mark.slow
def test_train_stage_stops_on_a_nonfinite_step(tokenizer):
  encoder = _tiny_encoder()
  start = nn.unbox(encoder.init(jax.random.PRNGKey(1), np.ones((1, 4), np.int32))["params"])
  config = sbert_train.TrainConfig(batch_size=2, learning_rate=1e6, log_every=1,
                                   packing=False)  # (a padded row per sentence)
  with pytest.raises(train_loop.NonFiniteLossError,
                     match=r"NaN/Inf at step \d+\. Stopped; lower --learning_rate \(now 1e\+06\)"):
    sbert_train.train_stage("nli", siamese.SoftmaxLoss(), NLI, 20, 3, encoder, start, tokenizer,
                            config, lambda line: None)


@pytest.mark.slow
def test_train_stage_shards_over_the_mesh_and_matches_one_device(tokenizer, tmp_path):
  # (conftest gives this process 8 CPU devices.) Vocabulary and widths split over `model`.
  encoder = bert.BertModel(bert.bert_tiny(vocab_size=32, hidden_dropout=0.0,
                                          attention_dropout=0.0), add_pooling_layer=False)
  start = nn.unbox(encoder.init(jax.random.PRNGKey(1), np.ones((1, 4), np.int32))["params"])
  config = sbert_train.TrainConfig(batch_size=4, learning_rate=1e-3, log_every=1, max_steps=3)
  meshes = {"mesh": partitioning.make_mesh((4, 2)),
            "single": partitioning.make_mesh((1, 1), devices=jax.devices()[:1])}
  trained = {name: sbert_train.train_stage("nli", siamese.SoftmaxLoss(), NLI, 2, 3, encoder,
                                           start, tokenizer, config, lambda line: None,
                                           str(tmp_path / name), mesh=mesh)
             for name, mesh in meshes.items()}
  losses = {name: [json.loads(l)["loss"] for l in (tmp_path / name / "metrics.jsonl")
                   .read_text().splitlines()] for name in meshes}
  assert len(losses["mesh"]) == 3
  np.testing.assert_allclose(losses["mesh"], losses["single"], rtol=1e-5)
  leaves = jax.tree.leaves(trained["mesh"])
  assert all(leaf.sharding.mesh.devices.size == 8 for leaf in leaves)
  assert any("model" in leaf.sharding.spec for leaf in leaves)  # not only replicated
  jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, atol=1e-5), trained["mesh"],
               trained["single"])


def test_train_config_names_the_bad_flag():
  with pytest.raises(ValueError, match="--num_microbatches=3: must be >= 1 and divide "
                                       "--batch_size=16"):
    sbert_train.TrainConfig(num_microbatches=3)
  with pytest.raises(ValueError, match="--on_nonfinite='ignore'"):
    sbert_train.TrainConfig(on_nonfinite="ignore")


@pytest.mark.slow
def test_cli_trains_scores_and_saves_an_encode_ready_model(tmp_path):
  if not (paths.data_dir() / "stsbenchmark").exists():
    pytest.skip("shared STS-B files are absent")
  base = sbert_helpers.write_tiny_bert(tmp_path / "base")
  out, results = tmp_path / "sbert", tmp_path / "results.jsonl"
  done = subprocess.run(
      [sys.executable, "-m", "bertjax.sbert.train", f"--checkpoint={base}", "--stages=stsb",
       "--stsb_epochs=1", "--max_steps=3", "--log_every=1", "--eval_poolings=", "--nosick",
       f"--out={out}", f"--results={results}", f"--metrics_dir={tmp_path / 'logs'}"],
      capture_output=True, text=True, timeout=900)
  assert done.returncode == 0, done.stderr[-3000:]
  assert "stsb step 3/3 " in done.stdout and "saved to" in done.stdout
  scored = [json.loads(l) for l in results.read_text().splitlines()]
  assert [r["row"] for r in scored] == ["SBERT-stsb, mean pooling"]
  assert -100 <= scored[0]["STSb"] <= 100 and scored[0]["stages"] == ["stsb"]
  rows = [json.loads(l) for l in (tmp_path / "logs" / "stsb" / "metrics.jsonl").read_text()
          .splitlines()]
  assert [r["step"] for r in rows] == [1, 2, 3]
  assert sbert_io.read_sentence_config(out).pooling == "mean"
  assert (out / "params").is_dir()


def test_max_eval_pairs_scores_the_first_pairs():
  pairs = sts.StsPairs("sts", ["a", "b", "c"], ["d", "e", "f"], np.array([1.0, 2.0, 3.0]))
  assert sbert_train.first_pairs(pairs, 0) is pairs and sbert_train.first_pairs(pairs, 5) is pairs
  first = sbert_train.first_pairs(pairs, 2)
  assert (first.sentences1, first.sentences2, list(first.scores)) == (["a", "b"], ["d", "e"],
                                                                      [1.0, 2.0])
