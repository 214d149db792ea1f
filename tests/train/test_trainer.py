"""The training loop: sharding equivalence, NaN handling, bf16, init_checkpoint, quickstart,
BERT's two pretraining phases."""
import math
import os

import gin
import jax
import numpy as np
import pytest

from bertjax import checkpoints
from bertjax.train import partitioning, trainer
from tests.helpers import trainer as tl


@pytest.fixture(autouse=True)
def _clean_gin():
  yield
  gin.clear_config()


def _run(model_dir, *bindings, mode="train"):
  tl.configure(*bindings)
  return trainer.Trainer(model_dir=str(model_dir)).run(mode)


@pytest.mark.slow
def test_sharded_4x2_matches_one_device(tmp_path):
  steps = ["Trainer.num_train_steps = 6", "Trainer.log_every = 1",
           "Trainer.checkpoint_every = 100"]
  _run(tmp_path / "mesh", *steps, "make_mesh.shape = (4, 2)")
  gin.clear_config()
  tl.configure(*steps)
  one_device = partitioning.make_mesh((1, 1), devices=jax.devices()[:1])
  trainer.Trainer(model_dir=str(tmp_path / "single"), mesh=one_device).run("train")
  sharded = [r["loss"] for r in tl.metrics(tmp_path / "mesh")]
  single = [r["loss"] for r in tl.metrics(tmp_path / "single")]
  assert len(sharded) == len(single) == 6
  np.testing.assert_allclose(sharded, single, rtol=1e-5)
  # The state really was laid out over the 2-way model axis.
  params, _ = checkpoints.load_params(str(tmp_path / "mesh"))
  assert params["bert"]["encoder"]["layers"]["mlp"]["intermediate"]["kernel"].shape[-1] == 64


def test_nonfinite_loss_stops_and_keeps_last_good_checkpoint(tmp_path):
  with pytest.raises(trainer.NonFiniteLossError, match=r"NaN/Inf at step 13.*last good checkpoint is step 10"):
    _run(tmp_path, "SyntheticMlmNsp.nan_at = 12", "Trainer.checkpoint_every = 5")
  run = checkpoints.RunCheckpoints(str(tmp_path))
  assert run.latest_step() == 10
  params, meta = checkpoints.load_params(str(tmp_path))
  assert meta["step"] == 10
  assert all(np.isfinite(p).all() for p in jax.tree.leaves(params))


def test_nonfinite_loss_skip_drops_the_update(tmp_path):
  _run(tmp_path, "SyntheticMlmNsp.nan_at = 3", "Trainer.on_nonfinite = 'skip'",
       "Trainer.log_every = 1")
  records = tl.metrics(tmp_path)
  assert [r["step"] for r in records if r["nonfinite"] > 0] == [4]
  assert math.isfinite(records[-1]["loss"])
  params, meta = checkpoints.load_params(str(tmp_path))
  assert meta["step"] == 20
  assert all(np.isfinite(p).all() for p in jax.tree.leaves(params))


@pytest.mark.slow
def test_loss_drops_with_bf16_compute_and_f32_params(tmp_path):
  summary = _run(tmp_path, "build_model.dtype = 'bfloat16'", "Trainer.num_train_steps = 60",
                 "Trainer.num_microbatches = 2", "Trainer.batch_size = 16",
                 "Trainer.log_every = 10",
                 "Trainer.checkpoint_every = 60", "warmup_linear_decay.peak_value = 3e-3",
                 mode="train_and_evaluate")
  losses = [r["loss"] for r in tl.metrics(tmp_path)]
  assert losses[-1] < losses[0] - 0.5, losses
  assert summary["eval"]["mlm_accuracy"] > 0.1
  params, _ = checkpoints.load_params(str(tmp_path))
  assert {p.dtype for p in jax.tree.leaves(params)} == {np.dtype("float32")}
  assert os.path.exists(summary["loss_curve"])
  assert os.listdir(os.path.join(tmp_path, "tensorboard", "train"))
  assert os.listdir(os.path.join(tmp_path, "tensorboard", "eval"))
  for key in ("tokens_per_sec", "model_flops_per_sec", "grad_norm", "learning_rate",
              "mlm_accuracy", "nsp_accuracy"):
    assert tl.metrics(tmp_path)[-1][key] > 0


def test_init_checkpoint_starts_a_new_run_from_weights(tmp_path):
  _run(tmp_path / "pre", "Trainer.num_train_steps = 5", "Trainer.checkpoint_every = 5")
  pretrained, _ = checkpoints.load_params(str(tmp_path / "pre"))
  converted = {"bert": pretrained["bert"]}  # e.g. a converted encoder without heads
  checkpoints.save_params(str(tmp_path / "converted"), converted, {"family": "bert"})
  gin.clear_config()
  tl.configure("Trainer.num_train_steps = 1", "Trainer.checkpoint_every = 1",
               f"Trainer.init_checkpoint = '{tmp_path / 'converted'}'",
               "warmup_linear_decay.peak_value = 0.0")
  job = trainer.Trainer(model_dir=str(tmp_path / "fine"))
  job.run("train")
  tuned, meta = checkpoints.load_params(str(tmp_path / "fine"))
  assert meta["step"] == 1
  # lr 0: the encoder is exactly the loaded one; heads are fresh.
  for a, b in zip(jax.tree.leaves(tuned["bert"]), jax.tree.leaves(pretrained["bert"])):
    np.testing.assert_array_equal(a, b)
  assert not np.array_equal(tuned["nsp_head"]["kernel"], pretrained["nsp_head"]["kernel"])


def test_mismatched_init_checkpoint_is_a_clear_error(tmp_path):
  checkpoints.save_params(str(tmp_path / "wrong"),
                          {"bert": {"pooler": {"kernel": np.zeros((3, 3), np.float32)}}}, {})
  tl.configure(f"Trainer.init_checkpoint = '{tmp_path / 'wrong'}'")
  with pytest.raises(ValueError, match="bert/pooler/kernel.*shape"):
    trainer.Trainer(model_dir=str(tmp_path / "run")).run("train")


class _LengthRecordingData(tl.SyntheticMlmNsp):
  """The synthetic stream, noting the sequence length of every train stream built."""
  train_lengths = []

  def __init__(self, task_name, split, batch_size, sequence_length, seed, **kwargs):
    super().__init__(task_name, split, batch_size, sequence_length, seed, **kwargs)
    if split == "train":
      _LengthRecordingData.train_lengths.append(sequence_length)

  def __iter__(self):
    for batch in super().__iter__():
      assert batch["input_ids"].shape[1] == self.length
      yield batch


gin.external_configurable(_LengthRecordingData, "LengthRecordingData")


def _configure_phase(phase, *extra):
  """The tiny run with runs/pretrain_phase{phase}.gin for runs/pretrain.gin, keeping the
  phase's sequence length (not the tiny run's 16)."""
  from bertjax import main
  lines = [line.replace("'runs/pretrain.gin'", f"'runs/pretrain_phase{phase}.gin'")
           for line in tl.TINY_RUN if not line.startswith("Trainer.sequence_length")]
  gin.clear_config()
  main.parse_gin([], lines + [
      "build_model.config_overrides = {'vocab_size': %d, 'hidden_size': 32, 'num_heads': 2, "
      "'intermediate_size': 64, 'max_position_embeddings': 512}" % tl.VOCAB,
      "Trainer.data_fn = @LengthRecordingData",
      "Trainer.eval_steps = 1", *extra])


def _bound(name):
  try:
    return gin.query_parameter(name)
  except ValueError:  # not bound
    return None


def test_bert_phases_split_the_steps_90_10_at_128_then_512_tokens():
  from bertjax import main
  files = ["runs/pretrain.gin", "models/bert_base.gin", "objectives/mlm_nsp.gin"]
  found = {}
  for phase in (1, 2):
    gin.clear_config()
    main.parse_gin([f"runs/pretrain_phase{phase}.gin"] + files[1:], ["PHASE1_DIR = '/p1'"])
    found[phase] = [_bound(name) for name in ("Trainer.num_train_steps",
                    "Trainer.sequence_length", "MaskedLM.max_predictions")]
    found[phase].append(str(_bound("Trainer.init_checkpoint")))  # (a macro in phase 2)
  gin.clear_config()
  main.parse_gin(files, [])
  total = gin.query_parameter("Trainer.num_train_steps")
  assert found == {1: [0.9 * total, 128, 20, "None"], 2: [0.1 * total, 512, 80, "%PHASE1_DIR"]}
  gin.clear_config()
  with pytest.raises(ValueError, match="PHASE1_DIR.*--gin_bindings"):
    main.parse_gin(["runs/pretrain_phase2.gin"] + files[1:], [])


@pytest.mark.slow
def test_bert_phase_two_starts_from_phase_one_params_at_512_tokens(tmp_path):
  _LengthRecordingData.train_lengths.clear()
  _configure_phase(1, "Trainer.num_train_steps = 2")
  trainer.Trainer(model_dir=str(tmp_path / "phase1")).run("train")
  phase1, meta1 = checkpoints.load_params(str(tmp_path / "phase1"))
  # lr 0 in phase 2: its parameters stay exactly the ones it started from.
  _configure_phase(2, "Trainer.num_train_steps = 1", f"PHASE1_DIR = '{tmp_path / 'phase1'}'",
                   "warmup_linear_decay.peak_value = 0.0")
  trainer.Trainer(model_dir=str(tmp_path / "phase2")).run("train")
  phase2, meta2 = checkpoints.load_params(str(tmp_path / "phase2"))
  assert _LengthRecordingData.train_lengths == [128, 512]
  assert (meta1["step"], meta2["step"]) == (2, 1)  # phase 2 counts its own steps
  assert jax.tree.structure(phase1) == jax.tree.structure(phase2)
  for a, b in zip(jax.tree.leaves(phase1), jax.tree.leaves(phase2)):
    np.testing.assert_array_equal(a, b)


def test_prng_impl_rbg_trains_resumes_and_other_names_are_refused(tmp_path):
  """Trainer.prng_impl: the rbg generator (t5x / MaxText's choice) trains and resumes with
  its 4-word key; an unknown name fails with the choices; the next Trainer resets it."""
  steps = ("Trainer.num_train_steps = 4", "Trainer.checkpoint_every = 2", "Trainer.log_every = 1")
  _run(tmp_path, *steps, "Trainer.prng_impl = 'rbg'")
  assert jax.random.key_data(jax.random.key(0)).shape == (4,)
  _run(tmp_path, *steps[1:], "Trainer.num_train_steps = 6", "Trainer.prng_impl = 'rbg'")
  assert [r["step"] for r in tl.metrics(tmp_path)] == list(range(1, 7))
  with pytest.raises(ValueError, match="prng_impl = 'philox'.*threefry2x32"):
    _run(tmp_path / "bad", "Trainer.prng_impl = 'philox'")
  _run(tmp_path / "default", "Trainer.num_train_steps = 1")
  assert jax.random.key_data(jax.random.key(0)).shape == (2,)


class _PackedRows(tl.SyntheticMlmNsp):
  """SyntheticMlmNsp laid out as packed rows: two examples per row (segment ids 1 and 2,
  positions restarting), and batch i leaves the last `EMPTY[i % 4]` slots of every row
  empty (segment 0)."""
  EMPTY = (1, 2, 3, 4)

  def __iter__(self):
    for i, batch in enumerate(super().__iter__()):
      length = self.length - self.EMPTY[i % 4]
      half = length // 2
      segments = np.zeros((self.batch_size, self.length), np.int32)
      segments[:, :half], segments[:, half:length] = 1, 2
      real = segments > 0
      positions = np.concatenate([np.arange(half), np.arange(self.length - half)])
      batch.update(segment_ids=segments, attention_mask=real.astype(np.int32),
                   position_ids=np.where(real, positions, 0).astype(np.int32),
                   input_ids=np.where(real, batch["input_ids"], 0),
                   mlm_weights=np.where(real, batch["mlm_weights"], 0))
      yield batch


def test_train_rows_report_packing_efficiency_as_real_tokens_over_slots(tmp_path):
  tl.configure("Trainer.num_train_steps = 6", "Trainer.log_every = 3",
               "Trainer.checkpoint_every = 6")
  trainer.Trainer(model_dir=str(tmp_path), data_fn=_PackedRows).run("train")
  rows = tl.metrics(tmp_path)
  slots = 8 * 16  # batch x sequence_length
  # Each row covers 3 steps: real tokens over slots of batches 0-2, then 3-5.
  real = [8 * (16 - _PackedRows.EMPTY[i % 4]) for i in range(6)]
  assert [r["step"] for r in rows] == [3, 6]
  assert [r["packing_efficiency"] for r in rows] == pytest.approx(
      [sum(real[:3]) / (3 * slots), sum(real[3:]) / (3 * slots)])


def test_fill_metrics_count_each_mask_s_real_tokens_and_slots():
  from bertjax.train import step as train_step
  mask = np.array([[1, 1, 1, 0], [1, 0, 0, 0]])
  targets = np.array([[1, 1, 0], [1, 1, 1]])
  fill = train_step.fill_metrics({"attention_mask": mask, "decoder_attention_mask": targets,
                                  "segment_ids": np.ones((2, 4))})
  assert {k: tuple(map(float, v)) for k, v in fill.items()} == {
      "packing_efficiency": (4.0, 8.0), "decoder_packing_efficiency": (5.0, 6.0)}
  # Without an attention_mask, segment ids (0 = padding) tell the real tokens.
  segments = np.array([[1, 1, 2, 0], [1, 2, 3, 3]])
  assert tuple(map(float, train_step.fill_metrics({"segment_ids": segments})[
      "packing_efficiency"])) == (7.0, 8.0)
  assert train_step.fill_metrics({"input_ids": segments}) == {}
