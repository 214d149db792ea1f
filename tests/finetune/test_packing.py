"""Packed rows (finetune.packing): every packable family's task classes give each packed
example the outputs it gets alone in an unpadded row (the parity table), the losses stay
per example, and what cannot pack says why."""

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bertjax.finetune import packing
from bertjax.hf import registry, tasks as hf_tasks
from bertjax.layers.long_attention import kinds as long_attention
from bertjax.models import albert, bert, deberta, distilbert, electra, modernbert, roberta
from bertjax.models import xlnet
from bertjax.objectives import downstream as objectives

TOL = 1e-5
LENGTH, SLOTS, VOCAB = 20, 4, 48
# Tiny random encoders of non-default sizes (odd head counts and widths, several layers).
SMALL = dict(vocab_size=VOCAB, hidden_size=24, num_layers=3, num_heads=3, intermediate_size=40,
             max_position_embeddings=64, hidden_dropout=0.0, attention_dropout=0.0)
# family -> (config, the pad id its padding holds)
FAMILIES = {
    "bert": bert.BertConfig(**SMALL),
    "roberta": roberta.RobertaConfig(**SMALL, pad_token_id=1),
    "albert": albert.AlbertConfig(**SMALL, embedding_size=12),
    "electra": electra.ElectraConfig(**SMALL, embedding_size=12),
    "distilbert": distilbert.DistilBertConfig(**SMALL),
    "deberta": deberta.DebertaConfig(**SMALL, max_relative_positions=8),
    "deberta-v2": deberta.DebertaConfig(**SMALL, version=2, position_buckets=4,
                                        max_relative_positions=16, position_biased_input=False),
    "modernbert": modernbert.ModernBertConfig(**SMALL, pad_token_id=0, local_attention=6,
                                              global_attn_every_n_layers=2),
}
KINDS = ("ForSequenceClassification", "ForTokenClassification", "ForQuestionAnswering")
CLASSES = ("a", "b", "c")


def _examples(pad_id: int, pairs: bool, count: int = 9, seed: int = 0) -> dict[str, np.ndarray]:
  """Right-padded rows of 2..11 tokens: single texts and pairs (`pairs`: token types 0 / 1,
  else all 0 as RoBERTa lays pairs out)."""
  rng = np.random.default_rng(seed)
  ids = np.full((count, LENGTH), pad_id, np.int32)
  mask = np.zeros((count, LENGTH), np.int32)
  types = np.zeros((count, LENGTH), np.int32)
  for i, n in enumerate(rng.integers(2, 12, count)):
    ids[i, :n] = rng.integers(3, VOCAB, n)
    mask[i, :n] = 1
    if pairs and i % 2:
      types[i, n // 2:n] = 1
  return {"input_ids": ids, "attention_mask": mask, "token_type_ids": types,
          "labels": rng.integers(0, 3, count).astype(np.int32)}


def _random_params(module, arrays) -> dict:
  """Random params of the module's shapes (traced, never compiled: cheap on a busy CPU)."""
  example = {k: jnp.asarray(v[:1]) for k, v in arrays.items() if k != "labels"}
  shapes = jax.eval_shape(lambda: nn.unbox(module.init(jax.random.key(0), **example)))
  rng = np.random.default_rng(1)
  return jax.tree.map(lambda s: (0.2 * rng.standard_normal(s.shape)).astype(s.dtype),
                      shapes["params"])


def _inputs(arrays) -> dict:
  return {k: jnp.asarray(v) for k, v in arrays.items() if k not in ("labels", "weights")}


# The table's rows of a family: (name, kind, config changes).
CASES = [("classification", "ForSequenceClassification", {}),
         ("regression", "ForSequenceClassification",
          {"labels": ("score",), "problem_type": "regression"}),
         ("token tagging", "ForTokenClassification", {}),
         ("QA spans", "ForQuestionAnswering", {})]


def parity_table(family: str, config, cases=CASES) -> dict[str, float]:
  """Max |packed - unpacked| of each case's class outputs, at every example (sequence
  classes) or every real token; all cases of a family in one compiled function."""
  adapter = registry.family_for(family)
  arrays = _examples(getattr(config, "pad_token_id", 0) or 0,
                     pairs=getattr(config, "type_vocab_size", 0) > 1)
  runs = {}
  for name, kind, changes in cases:
    module = adapter.make_module(hf_tasks.architecture_for(adapter, kind),
                                 config.replace(**{"labels": CLASSES, **changes}))
    packed = packing.pack(arrays, SLOTS, per_example=kind == "ForSequenceClassification")
    assert packed.num_rows < len(arrays["input_ids"]) / 2  # several examples per row
    runs[name] = (module, _random_params(module, arrays), packed)

  @jax.jit
  def outputs(params):
    return {name: (module.apply({"params": params[name]}, **_inputs(arrays)),
                   module.apply({"params": params[name]}, **_inputs(packed.arrays)))
            for name, (module, _, packed) in runs.items()}

  diffs = {}
  real = arrays["attention_mask"].astype(bool)
  results = jax.tree.map(np.asarray, outputs({name: run[1] for name, run in runs.items()}))
  for name, (alone, together) in results.items():
    packed = runs[name][2]
    if "start_logits" in alone or alone["logits"].ndim == 3:  # per token
      diffs[name] = max(float(np.abs(packed.tokens(together[k])[real] - alone[k][real]).max())
                        for k in alone if k.endswith("logits"))
    else:
      assert together["logits"].shape[:2] == (packed.num_rows, SLOTS)
      diffs[name] = float(np.abs(packed.examples(together["logits"]) - alone["logits"]).max())
  return diffs


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_packed_outputs_equal_unpacked_ones(family):
  """The parity table: classification (single texts and pairs), regression, token tagging
  and QA spans of each family's transformers task classes."""
  cases = CASES
  if family == "modernbert":  # its other pooling: the mean of the example's tokens
    cases = CASES + [("mean pooling", "ForSequenceClassification",
                      {"classifier_pooling": "mean"})]
  diffs = parity_table(family, FAMILIES[family], cases)
  print(family, diffs)
  assert max(diffs.values()) < TOL, diffs


# Who cannot pack, and why (packing.refusal): each says so before anything runs.
CANNOT_PACK = {
    "xlnet": ("xlnet", xlnet.XLNetConfig(), "ForSequenceClassification", "left-padded"),
    "bigbird": ("big_bird", None, "ForQuestionAnswering", "block-sparse"),
    "longformer": ("longformer", None, "ForSequenceClassification", "global attention"),
    "linformer": ("bert", bert.BertConfig(attention=long_attention.attention("linformer")),
                  "ForSequenceClassification", "long-sequence attention \\(Linformer\\)"),
    "multiple choice": ("bert", bert.BertConfig(), "ForMultipleChoice", "do not fit one row"),
}


@pytest.mark.parametrize("case", sorted(CANNOT_PACK))
def test_what_cannot_pack_refuses_with_its_reason(case):
  family, config, kind, reason = CANNOT_PACK[case]
  with pytest.raises(ValueError, match=f"Packing refused for {family} {kind}: .*{reason}.*"
                                       "--packing=false"):
    packing.check(family, config, kind)
  chosen = packing.Packing.choose(True, family, config, kind)
  assert not chosen.enabled and chosen.reason
  assert packing.Packing.choose(True, "bert", bert.BertConfig(), kind="ForTokenClassification"
                                ).enabled


def test_xlnet_itself_refuses_packed_rows():
  module = xlnet.XLNetModel(xlnet.XLNetConfig(vocab_size=20, hidden_size=8, num_layers=1,
                                              num_heads=2, intermediate_size=8))
  ids = jnp.ones((1, 4), jnp.int32)
  with pytest.raises(ValueError, match="XLNet takes no position_ids / segment_ids"):
    jax.eval_shape(lambda: module.init(jax.random.key(0), ids, segment_ids=ids))


def test_rows_fill_greedily_in_data_order():
  assert packing.plan([3, 4, 2, 6, 1, 1, 1], capacity=8, max_examples_per_row=3) == [
      [0, 1], [2, 3], [4, 5, 6]]
  assert packing.plan([8, 1], 8, 4) == [[0], [1]]
  with pytest.raises(ValueError, match="Example 1 has 9 tokens; packing takes 1 to 8"):
    packing.plan([2, 9], 8, 4)
  with pytest.raises(ValueError, match="Example 0 has 0 tokens"):
    packing.plan([0], 8, 4)
  with pytest.raises(ValueError, match="max_examples_per_row = 0"):
    packing.plan([1], 8, 0)


def test_pack_lays_examples_end_to_end_and_unpacks_them():
  arrays = {"input_ids": np.array([[5, 6, 7, 0, 0, 0], [8, 9, 0, 0, 0, 0], [4, 0, 0, 0, 0, 0]]),
            "attention_mask": np.array([[1, 1, 1, 0, 0, 0], [1, 1, 0, 0, 0, 0],
                                        [1, 0, 0, 0, 0, 0]]),
            "labels": np.array([2, 0, 1]), "start_positions": np.array([1, 0, 0]),
            "first_piece": np.array([[0, 2], [1, -1], [-1, -1]])}
  packed = packing.pack(arrays, max_examples_per_row=2)
  got = packed.arrays
  np.testing.assert_array_equal(got["input_ids"], [[5, 6, 7, 8, 9, 0], [4, 0, 0, 0, 0, 0]])
  np.testing.assert_array_equal(got["segment_ids"], [[1, 1, 1, 2, 2, 0], [1, 0, 0, 0, 0, 0]])
  np.testing.assert_array_equal(got["position_ids"], [[0, 1, 2, 0, 1, 0], [0, 0, 0, 0, 0, 0]])
  np.testing.assert_array_equal(got["example_positions"], [[0, 3], [0, -1]])
  np.testing.assert_array_equal(got["weights"], [[1, 1], [1, 0]])
  np.testing.assert_array_equal(got["labels"], [[2, 0], [1, 0]])
  np.testing.assert_array_equal(got["start_positions"], [[1, 3], [0, 0]])  # row positions
  np.testing.assert_array_equal(got["first_piece"], [[[0, 2], [4, -1]], [[-1, -1], [0, 0]]])
  np.testing.assert_array_equal(packed.tokens(got["input_ids"]), arrays["input_ids"])
  np.testing.assert_array_equal(packed.examples(got["labels"]), arrays["labels"])
  report = packing.Packing(True, max_examples_per_row=2).report(arrays)
  assert report["efficiency"] == 0.5 and report["unpacked_efficiency"] == 0.3333
  assert report["rows"] == 2 and report["examples_per_row"] == 1.5
  # Token tasks: no slots, only the rows.
  tokens = packing.pack({k: arrays[k] for k in ("input_ids", "attention_mask")}, 2, False)
  assert set(tokens.arrays) == {"input_ids", "attention_mask", "segment_ids", "position_ids"}


@pytest.mark.parametrize("seed", range(5))
def test_tight_plan_places_every_example_once_in_no_more_rows(seed):
  rng = np.random.default_rng(seed)
  lengths = rng.integers(1, 65, size=300).tolist()
  capacity, slots = 64, int(rng.integers(1, 9))
  rows = packing.plan_tight(lengths, capacity, slots)
  assert sorted(i for row in rows for i in row) == list(range(len(lengths)))
  assert all(len(row) <= slots and sum(lengths[i] for i in row) <= capacity for row in rows)
  assert len(rows) <= len(packing.plan(lengths, capacity, slots))
  # Each row starts with the longest example left.
  assert [lengths[row[0]] for row in rows] == sorted((lengths[row[0]] for row in rows),
                                                      reverse=True)
  with pytest.raises(ValueError, match="Example 1 has 65 tokens"):
    packing.plan_tight([3, 65], capacity, slots)


def test_rows_are_as_long_as_the_longest_example_needs():
  # Rows of 128 whose longest example has 40 tokens pack into rows of 64 (the power of
  # two holding it); per-token outputs come back at the featurizer's 128.
  lengths = np.array([40, 13, 9, 30, 5])
  mask = (np.arange(128)[None] < lengths[:, None]).astype(np.int32)
  ids = np.where(mask == 1, np.arange(1, 129)[None], 0)
  packed = packing.pack({"input_ids": ids, "attention_mask": mask}, 8, per_example=False)
  assert packed.arrays["input_ids"].shape == (2, 64)
  np.testing.assert_array_equal(packed.tokens(packed.arrays["input_ids"]), ids)
  assert [packing.row_length(n, 128) for n in (1, 32, 33, 64, 65, 128)] == [
      32, 32, 64, 64, 128, 128]
  assert packing.row_length(20, 16) == 16  # never longer than the featurizer's rows


def test_a_packed_batch_holds_about_as_many_examples():
  arrays = _examples(0, pairs=False, count=64)
  rows, per_batch = packing.Packing(True, max_examples_per_row=SLOTS).train_rows(arrays, 16)
  per_row = 64 / len(rows["input_ids"])
  assert per_row > 2 and abs(per_batch * per_row - 16) <= per_row / 2
  _, even = packing.Packing(True, max_examples_per_row=SLOTS).train_rows(arrays, 16, 4)
  assert even % 4 == 0 and even >= per_batch
  # Fewer packed rows than the devices a batch spreads over: training stays unpacked.
  few = _examples(0, pairs=False, count=4)
  rows, per_batch = packing.Packing(True, max_examples_per_row=SLOTS).train_rows(few, 4, 4)
  assert per_batch == 4 and rows["input_ids"].shape == few["input_ids"].shape


def test_training_rows_pack_the_examples_in_a_seeded_order():
  arrays = _examples(0, pairs=False, count=64)
  packer = packing.Packing(True, max_examples_per_row=SLOTS)
  rows = lambda seed: packer.train_rows(arrays, 16, seed=seed)[0]["input_ids"]
  np.testing.assert_array_equal(rows(3), rows(3))  # a resumed run packs the same rows
  assert rows(3).shape != rows(4).shape or (rows(3) != rows(4)).any()
  # Every example's tokens are in the rows once, whatever the order.
  real = lambda ids: sorted(ids[ids != 0].tolist())
  assert real(rows(3)) == real(arrays["input_ids"])
  # The report describes the rows that train (with the seed) and those that predict.
  trained = packer.train_rows(arrays, 16, seed=3)[0]["attention_mask"]
  report = packer.report(arrays, seed=3)
  assert (report["rows"], report["efficiency"]) == (len(trained), round(trained.mean(), 4))
  predicted = packer.pack(arrays, seed=None).arrays["attention_mask"]
  assert packer.report(arrays)["efficiency"] == round(predicted.mean(), 4)
  assert len(predicted) <= len(trained)


def test_pack_refuses_rows_it_cannot_pack():
  left = {"input_ids": np.ones((1, 4), np.int32), "attention_mask": np.array([[0, 0, 1, 1]])}
  with pytest.raises(ValueError, match="right-padded rows.*XLNet's runs unpacked"):
    packing.pack(left, 2)
  assert packing.pack({"attention_mask": np.ones((2, 4), np.int32) * [1, 0, 0, 0]}, 8
                      ).arrays["weights"].shape == (1, 3)  # slots: fewer than the row's tokens
  with pytest.raises(ValueError, match="Packing takes rows \\[N, L\\]"):
    packing.pack({"attention_mask": np.ones((1, 2, 4), np.int32)})


def test_options_refuse_a_row_cap_that_cannot_be():
  from bertjax.finetune import fitting
  with pytest.raises(ValueError, match="Options.max_examples_per_row = 0 "
                                       "\\(--max_examples_per_row\\): give 1 or more"):
    fitting.Options(max_examples_per_row=0)


def _scatter(packed: packing.Packed, per_example: np.ndarray, fill: float) -> np.ndarray:
  out = np.full((packed.num_rows, SLOTS, *per_example.shape[1:]), fill, np.float32)
  out[packed.row, packed.slot] = per_example
  return out


def test_losses_stay_per_example():
  """A packed batch's loss and metrics are its examples' as the unpacked batch has them:
  classification and regression weigh each example slot; each packed span's softmax runs
  over its example's own tokens (unpacked: its row's real tokens)."""
  rng = np.random.default_rng(0)
  arrays = _examples(0, pairs=True)
  arrays["start_positions"] = (arrays["attention_mask"].sum(1) - 1).astype(np.int32)
  arrays["end_positions"] = np.zeros_like(arrays["start_positions"])
  packed = packing.pack(arrays, SLOTS)
  batch = {k: jnp.asarray(v) for k, v in packed.arrays.items()}
  logits = rng.standard_normal((len(arrays["labels"]), 3)).astype(np.float32)
  for objective, unpacked_logits, labels in (
      (objectives.Classification(), logits, arrays["labels"]),
      (objectives.Regression(2.5, 1.5), logits[:, :1], logits[:, 1] * 5)):
    alone = objective({"logits": jnp.asarray(unpacked_logits)},
                      {**arrays, "labels": jnp.asarray(labels)})
    together = objective({"logits": jnp.asarray(_scatter(packed, unpacked_logits, 9.0))},
                         {**batch, "labels": jnp.asarray(_scatter(packed, labels, 0))})
    np.testing.assert_allclose(together[0], alone[0], rtol=1e-6)
    jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-6), together[1], alone[1])
  real = arrays["attention_mask"].astype(bool)
  spans = {k: np.where(real, rng.standard_normal(real.shape), -1e9).astype(np.float32)
           for k in ("start_logits", "end_logits")}
  alone = objectives.SpanExtraction()(spans, arrays)
  # Packed rows hold other examples' tokens (and padding) around each example: large logits.
  rows = {k: np.full(packed.arrays["attention_mask"].shape, 7.0, np.float32) for k in spans}
  for i, (r, start, n) in enumerate(zip(packed.row, packed.start, packed.length)):
    for k in spans:
      rows[k][r, start:start + n] = spans[k][i, :n]
  together = objectives.SpanExtraction()(rows, batch)
  np.testing.assert_allclose(together[0], alone[0], rtol=1e-6)


def test_a_glue_run_trains_packed_and_evaluates_as_unpacked(tmp_path):
  """With a learning rate of 0 the model stays as it starts: packed and unpacked
  evaluations give the same logits; the run reports its packing and keeps the number of
  steps (a packed batch holds about as many examples)."""
  import transformers
  from bertjax.checkpoints.formats import open_model
  from bertjax.evaluation import glue as glue_eval, readers
  from bertjax.finetune import fitting, loop, pipelines
  from bertjax.finetune.tokenization import WordPiece
  from tests.helpers import finetune as ftl
  folder = str(tmp_path / "bert")
  transformers.BertModel(transformers.BertConfig(
      vocab_size=len(ftl.WORDS), hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
      intermediate_size=32, max_position_embeddings=64)).save_pretrained(folder)
  ftl.write_vocab(folder)
  data_dir = ftl.write_rte(tmp_path / "data", train_rows=32, dev_rows=10)
  task, skips = glue_eval.get_task("rte"), readers.SkipLog()
  train = glue_eval.read_examples(task, "train", skips, data_dir)
  dev = {"dev": glue_eval.read_examples(task, "dev", skips, data_dir)}
  runs = {}
  for packed in (True, False):
    options = fitting.Options(
        finetune=loop.FinetuneConfig(batch_size=8, eval_batch_size=4, learning_rate=0.0),
        max_steps=2, max_seq_length=32, data_dir=data_dir, packing=packed)
    _, chosen, report, _ = pipelines.fit_pairs(task, train, dev, open_model(folder),
                                               WordPiece.from_path(folder), options)
    runs[packed] = chosen.outputs["dev"], report
  np.testing.assert_allclose(runs[True][0], runs[False][0], atol=TOL)
  on, off = runs[True][1]["packing"], runs[False][1]["packing"]
  assert on["train"]["enabled"] and on["train"]["examples_per_row"] > 2
  assert on["train"]["efficiency"] > 1.5 * on["train"]["unpacked_efficiency"]
  assert on["dev"]["examples"] == 10 and on["dev"]["rows"] < 5
  assert off["train"]["reason"] == "turned off (packing=False)" and "rows" not in off["train"]
  assert runs[True][1]["train_rows"] == runs[False][1]["train_rows"] == 32


def test_feature_based_states_of_packed_rows_are_the_unpacked_ones():
  """The frozen encoder of the feature-based taggers runs packed: each word's states at its
  first piece are the ones its sentence gets alone."""
  from bertjax.finetune import feature_based
  encoder = bert.BertModel(FAMILIES["bert"])
  arrays = _examples(0, pairs=False)
  arrays["first_piece"] = np.where(np.arange(3) < arrays["attention_mask"].sum(1, keepdims=True),
                                   np.arange(3), -1).astype(np.int32)
  params = _random_params(encoder, {k: v for k, v in arrays.items() if k != "first_piece"})
  alone = feature_based.extract(encoder, params, arrays, batch_size=4)
  together = feature_based.extract(encoder, params, arrays, batch_size=4,
                                   packer=packing.Packing(True, packing.TOKENS, SLOTS))
  assert alone.shape == together.shape == (9, 3, 4, 24)
  np.testing.assert_allclose(together.astype(np.float32), alone.astype(np.float32), atol=1e-3)
