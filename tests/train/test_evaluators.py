"""Generation metrics: the evaluator equals decoding example by example, and the trainer
reports them at every evaluation (params sharded over the 8 test devices)."""
import functools

import gin
import jax
import numpy as np
import pytest

from bertjax.inference import decoding
from bertjax import main
from bertjax.train import trainer
from bertjax.data.recipes import text_to_text as t2t
from bertjax.train import evaluators as generation
from bertjax.models import t5
from bertjax.objectives import seq2seq
from tests.helpers import text_to_text as testlib

ROWS = [["a good movie", "1"], ["a bad film", "0"], ["it is fine", "1"], ["terrible acting", "0"],
        ["the story was good", "1"]]


@pytest.fixture(scope="module")
def vocab(tmp_path_factory):
  return testlib.toy_vocabulary(str(tmp_path_factory.mktemp("spm")))


@pytest.fixture
def sst2_files(tmp_path, monkeypatch):
  monkeypatch.setenv("BERTJAX_DATA_DIR", str(tmp_path))
  for split in ("train", "dev"):
    testlib.write_glue(tmp_path, "SST-2", split, ["sentence", "label"], ROWS)
  return tmp_path


def _tiny_t5(vocab):
  cfg = t5.T5Config(vocab_size=vocab.vocab_size, hidden_size=16, head_dim=8,
                    intermediate_size=32, num_layers=1, num_decoder_layers=1, num_heads=2,
                    hidden_dropout=0.0)
  return t5.T5ForConditionalGeneration(cfg)


def test_evaluator_equals_decoding_each_example_alone(vocab, sst2_files):
  del sst2_files
  task = t2t.get_task("t2t_glue_sst2", vocab)
  model = _tiny_t5(vocab)
  ids = np.ones((1, 8), np.int32)
  params = model.init(jax.random.PRNGKey(3), ids, decoder_input_ids=ids)["params"]
  evaluator = generation.GenerationEvaluator(batch_size=2, max_new_tokens=3)
  results = evaluator(model, params, task_name="t2t_glue_sst2", split="validation",
                      sequence_length=16)
  examples = evaluator.examples(task, "validation", 16)
  alone = []
  for ex in examples:  # one row, no dummy rows (padded to one length: a single compile)
    ids = np.zeros((1, 16), np.int32)
    ids[0, :len(ex["inputs"])] = ex["inputs"]
    out = decoding.generate(model, params, ids, (ids > 0).astype(np.int32), max_new_tokens=3,
                            model_config=model.config)
    alone.append(generation.decode_ids(vocab, out[0], vocab.eos_id))
  assert evaluator.last_predictions == alone
  predictions = [task.postprocess_fn(t) for t in alone]
  labels = [int(l) for _, l in ROWS]
  assert results["generate_examples"] == 5.0
  assert results["generate_accuracy"] == pytest.approx(np.mean(np.equal(predictions, labels)))
  assert results["generate_invalid_predictions"] == sum(p == t2t.INVALID for p in predictions)
  assert generation.GenerationEvaluator(max_examples=2)(
      model, params, "t2t_glue_sst2", "validation", 16)["generate_examples"] == 2.0


def test_decode_ids_stops_at_eos():
  class Vocab:
    def decode(self, ids):
      return " ".join(map(str, ids))
  assert generation.decode_ids(Vocab(), np.array([0, 5, 6, 1, 7]), eos_id=1) == "5 6"
  assert generation.decode_ids(Vocab(), np.array([0, 5, 6]), eos_id=1) == "5 6"


@pytest.mark.slow
def test_trainer_reports_generation_metrics(vocab, sst2_files, tmp_path):
  del sst2_files
  job = trainer.Trainer(
      model_dir=str(tmp_path / "run"), model=_tiny_t5(vocab), objective=seq2seq.Seq2SeqLM(),
      train_task="t2t_glue_sst2",
      data_fn=functools.partial(t2t.text_to_text_dataset, vocabulary=vocab),
      num_train_steps=2, batch_size=8, sequence_length=16, eval_steps=None,
      evaluators=[generation.GenerationEvaluator(batch_size=4, max_new_tokens=3)],
      log_every=1, checkpoint_every=2, show_progress=False, async_checkpoints=False)
  assert len(job.mesh.devices.flat) == 8
  results = job.run("train_and_evaluate")["eval"]
  assert results["generate_examples"] == 5.0
  assert 0.0 <= results["generate_accuracy"] <= 1.0
  assert "seq2seq_loss" in results  # the teacher-forced eval still runs


def test_finetune_gin_builds_with_generation_eval(tmp_path):
  gin.clear_config()
  try:
    main.parse_gin(["runs/t5_c4_tiny_sst2.gin"], ["INIT_CHECKPOINT = '/some/run'"])
    job = trainer.Trainer(model_dir=str(tmp_path))
    assert job.train_task == "t2t_glue_sst2" and job.init_checkpoint == "/some/run"
    assert (job.data_fn.__module__, job.data_fn.__name__) == ("bertjax.data.recipes.text_to_text",
                                                              "text_to_text_dataset")
    (evaluator,) = job.evaluators
    assert isinstance(evaluator, generation.GenerationEvaluator)
    assert evaluator.max_new_tokens == 4
  finally:
    gin.clear_config()
