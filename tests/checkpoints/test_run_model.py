"""The model a `python -m bertjax.main` run trained, opened from its model_dir, its
checkpoints/ folder or one step folder: from the model record the trainer writes
(model.json), and, for runs made before it, through `record.upgrade` (config.gin)."""
import gin
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bertjax.checkpoints import legacy
from bertjax.checkpoints.formats import open_model
from bertjax.models import electra, spanbert
from tests.helpers import run_dirs


@pytest.fixture(autouse=True)
def _clean_gin():
  gin.clear_config()
  yield
  gin.clear_config()


@pytest.fixture(params=[True, False], ids=["recorded", "legacy"])
def recorded(request):
  return request.param


def _assert_same(got, want):
  jax.tree.map(np.testing.assert_array_equal, got, want)


def test_model_dir_checkpoints_folder_and_step_folder_open_their_steps(tmp_path, recorded):
  saved = run_dirs.fake_run(tmp_path / "run", "bert_tiny", steps=(3, 7),
                             recorded=recorded)
  for path, step in ((tmp_path / "run", 7), (tmp_path / "run" / "checkpoints", 7),
                     (tmp_path / "run" / "checkpoints" / "3", 3)):
    model = open_model(path)
    assert (model.family.name, model.architecture) == ("bert", "BertForPreTraining")
    assert model.description == f"bert BertForPreTraining (step {step}) from {path}"
    assert model.tokenizer_dir == str(tmp_path / "run")  # the model_dir, wherever opened
    _assert_same(model.params, saved[step])
  # It runs with the reference's input names and output names.
  out = model(input_ids=np.ones((1, 5), np.int32))
  assert out["prediction_logits"].shape == (1, 5, 40)
  assert out["seq_relationship_logits"].shape == (1, 2)
  assert open_model(tmp_path / "run", tokenizer_dir=tmp_path).tokenizer_dir == str(tmp_path)


def test_electra_run_opens_as_its_discriminator(tmp_path, recorded):
  params = run_dirs.fake_run(tmp_path / "run", "electra_small", recorded=recorded)[7]
  model = open_model(tmp_path / "run")
  assert model.architecture == "ElectraForPreTraining"
  assert "cut from ElectraGeneratorDiscriminator" in model.description
  _assert_same(model.params, electra.discriminator_params(params))
  assert model(input_ids=np.ones((2, 5), np.int32))["logits"].shape == (2, 5)


@pytest.mark.parametrize("variant", ["electra_replace_mlm", "electra_all_tokens_mlm"])
def test_electra_mlm_ablation_runs_open_as_their_mlm_network(tmp_path, variant, recorded):
  params = run_dirs.fake_run(tmp_path / "run", ("electra_small", variant),
                             recorded=recorded)[7]
  model = open_model(tmp_path / "run")
  assert model.architecture == "ElectraForMaskedLM"
  _assert_same(model.params, electra.mlm_params(params))


def test_spanbert_run_opens_without_its_sbo_head(tmp_path, recorded):
  params = run_dirs.fake_run(tmp_path / "run", "spanbert_base",
                             features=("sbo_left", "sbo_right", "sbo_pos"), recorded=recorded)[7]
  assert "sbo_head" in params
  model = open_model(tmp_path / "run")
  assert (model.family.name, model.architecture) == ("bert", "BertForMaskedLM")
  _assert_same(model.params, spanbert.bert_params(params))


def test_distillation_run_opens_as_its_student(tmp_path, recorded):
  params = run_dirs.fake_run(tmp_path / "run", "distilbert_base", recorded=recorded)[7]
  model = open_model(tmp_path / "run")
  assert (model.family.name, model.architecture) == ("distilbert", "DistilBertForMaskedLM")
  assert "student/ of the run" in model.description
  _assert_same(model.params, params["student"])
  assert model(input_ids=jnp.ones((1, 5), jnp.int32))["logits"].shape == (1, 5, 40)


def test_weights_that_fit_no_model_of_config_gin_are_refused(tmp_path):
  run_dirs.fake_run(tmp_path / "run", "bert_tiny", recorded=False)
  config = tmp_path / "run" / "config.gin"
  config.write_text(config.read_text().replace("'hidden_size': 16", "'hidden_size': 8"))
  with pytest.raises(ValueError, match=r"fit none of the models that .*config.gin builds "
                                       r"\(build_model: BertForPreTraining\)"):
    open_model(tmp_path / "run")


def test_run_without_build_model_or_checkpoints_is_explained(tmp_path):
  (tmp_path / "finetuned").mkdir()
  (tmp_path / "finetuned" / "config.gin").write_text("FinetuneRun.task = 'rte'\n")
  with pytest.raises(ValueError, match="config.gin has no build_model bindings"):
    open_model(tmp_path / "finetuned")
  (tmp_path / "fresh").mkdir()
  (tmp_path / "fresh" / "config.gin").write_text(
      "build_model.architecture = 'bertjax.models.bert.BertForPreTraining'\n"
      "build_model.config = 'bertjax.models.bert.bert_tiny'\n")
  with pytest.raises(FileNotFoundError, match="nor a complete training checkpoint"):
    open_model(tmp_path / "fresh")


def test_run_models_reads_macros_and_puts_the_trained_model_first():
  text = ("M = 'bertjax.models.bert.bert_tiny'\n"
          "teacher/build_model.architecture = 'bertjax.models.bert.BertForMaskedLM'\n"
          "teacher/build_model.config = %M\n"
          "student/build_model.architecture = 'bertjax.models.bert.BertModel'\n"
          "student/build_model.config = %M\n"
          "build_model.dtype = 'bfloat16'\n"
          "Trainer.model = @student_teacher()\n")
  models = legacy.run_models(text)
  assert [(s, type(m).__name__) for s, m in models] == [("student", "BertModel"),
                                                          ("teacher", "BertForMaskedLM")]
  with pytest.raises(ValueError, match="no build_model bindings"):
    legacy.run_models("Trainer.batch_size = 8\n")
  with pytest.raises(ValueError, match="binds no build_model.architecture"):
    legacy.run_models("build_model.dtype = 'bfloat16'\n")


def test_a_recorded_run_opens_from_its_record_not_config_gin(tmp_path):
  params = run_dirs.fake_run(tmp_path / "run", "bert_tiny")[7]
  (tmp_path / "run" / "config.gin").write_text("garbage that gin cannot parse (\n")
  model = open_model(tmp_path / "run")
  assert (model.family.name, model.architecture) == ("bert", "BertForPreTraining")
  _assert_same(model.params, params)
