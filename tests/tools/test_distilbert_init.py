"""DistilBERT's student initialisation opens its BERT teacher in any format."""
import jax
import numpy as np
import pytest
import torch
import transformers

from bertjax.checkpoints import converted
from bertjax.checkpoints.formats import open_model
from bertjax.checkpoints.params import load_params
from bertjax.models import distilbert
from bertjax.tools import distilbert_init
from tests.helpers import run_dirs


def _assert_same(got, want):
  jax.tree.map(np.testing.assert_array_equal, got, want)


def _teacher_hf(directory):
  torch.manual_seed(0)
  transformers.BertForMaskedLM(transformers.BertConfig(
      vocab_size=30, hidden_size=16, num_hidden_layers=4, num_attention_heads=2,
      intermediate_size=32, max_position_embeddings=40)).save_pretrained(directory)
  return str(directory)


@pytest.mark.parametrize("teacher_format", ["hf", "converted", "run"])
def test_student_is_cut_from_a_teacher_in_any_format(tmp_path, teacher_format):
  if teacher_format == "run":
    teacher_dir = str(tmp_path / "run")
    run_dirs.fake_run(tmp_path / "run", "bert_tiny")
  else:
    teacher_dir = _teacher_hf(tmp_path / "hf")
    if teacher_format == "converted":
      converted.save(open_model(teacher_dir), tmp_path / "converted")
      teacher_dir = str(tmp_path / "converted")
  teacher = open_model(teacher_dir)
  config, chosen = distilbert_init.write_init_checkpoint(teacher_dir, str(tmp_path / "init"))
  assert chosen == distilbert.every_other_layer(teacher.config.num_layers)
  assert config.num_layers == len(chosen)
  written, metadata = load_params(str(tmp_path / "init"))
  assert metadata["teacher"] == teacher_dir and metadata["teacher_layers"] == chosen
  teacher_params = jax.device_get(teacher.params)
  _assert_same(written["teacher"], teacher_params)
  _assert_same(written["student"], distilbert.student_params_from_teacher(teacher_params, chosen))


def test_a_teacher_of_another_family_is_refused(tmp_path):
  run_dirs.fake_run(tmp_path / "run", "roberta_base")
  with pytest.raises(ValueError, match="holds a 'roberta' model; the DistilBERT recipe distils "
                                       "a BERT teacher"):
    distilbert_init.write_init_checkpoint(str(tmp_path / "run"), str(tmp_path / "init"))


def test_a_random_student_leaves_the_student_to_the_run(tmp_path):
  run_dirs.fake_run(tmp_path / "run", "bert_tiny")
  config, chosen = distilbert_init.write_init_checkpoint(
      str(tmp_path / "run"), str(tmp_path / "init"), random_student=True)
  written, metadata = load_params(str(tmp_path / "init"))
  assert set(written) == {"teacher"} and chosen == [] and metadata["teacher_layers"] == []
  assert metadata["student_config"]["num_layers"] == config.num_layers == (
      open_model(str(tmp_path / "run")).config.num_layers + 1) // 2
  _assert_same(written["teacher"], jax.device_get(open_model(str(tmp_path / "run")).params))
