"""The model record (model.json) every producer writes beside its weights, what open_model
reads back from it, the upgrade of folders written before it, and its errors. Runs:
test_run_model.py (recorded and legacy)."""
import dataclasses
import json
import os

import flax.linen as nn
import gin
import jax
import numpy as np
import pytest

from bertjax.checkpoints import converted, legacy, record
from bertjax.checkpoints.formats import open_model
from bertjax.checkpoints.model import HFModel
from bertjax.hf import registry
from bertjax.layers.long_attention import sparse
from bertjax.models import bert, bigbird, distilbert, electra, elmo
from bertjax.models.common.distillation import StudentTeacher
from bertjax.sbert import io as sbert_io
from bertjax.tools import distilbert_init, electra_stage_two
from bertjax.train import run_start
from tests.helpers import run_dirs

TINY = dict(vocab_size=40, hidden_size=16, num_layers=2, num_heads=2, intermediate_size=32,
            max_position_embeddings=40)
WORDS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [f"w{i}" for i in range(35)]
IDS = np.arange(10, dtype=np.int32).reshape(2, 5) + 5


@pytest.fixture(autouse=True)
def _clean_gin():
  gin.clear_config()
  yield
  gin.clear_config()


def _model(architecture="BertForSequenceClassification", **overrides) -> HFModel:
  config = bert.BertConfig(**{**TINY, **overrides})
  family = registry.family_by_name("bert")
  module = family.make_module(architecture, config)
  params = nn.unbox(module.init(jax.random.key(0), **family.init_inputs(config))["params"])
  return HFModel(family, architecture, config, module, params)


def _same(a, b):
  jax.tree.map(np.testing.assert_array_equal, a, b)


def _vocab(folder):
  folder.mkdir(exist_ok=True)
  (folder / "vocab.txt").write_text("\n".join(WORDS) + "\n")
  return folder


# ------------------------------------------------------------------ producers
def test_convert_writes_the_record_and_open_model_rebuilds_the_same_model(tmp_path):
  model = _model(labels=("neg", "pos"), problem_type="single_label_classification")
  converted.save(model, tmp_path / "ckpt", tokenizer_from=_vocab(tmp_path / "vocab"),
                 source="somewhere")
  written = json.loads((tmp_path / "ckpt" / record.FILE).read_text())
  assert written["version"] == record.VERSION
  assert (written["family"], written["architecture"]) == ("bert", "BertForSequenceClassification")
  assert written["config"]["class"] == "bertjax.models.bert.model.BertConfig"
  assert written["config"]["fields"]["labels"] == ["neg", "pos"]
  assert "dtype" not in written["config"]["fields"] and written["dtype"] == "float32"
  assert written["weights"] == {"folder": "params", "subtree": None, "cut_from": None}
  assert (written["tokenizer"], written["source"]) == (".", "somewhere")
  assert not [n for n in os.listdir(tmp_path / "ckpt") if n.endswith(".partial")]
  opened = open_model(tmp_path / "ckpt")
  assert opened.config == model.config and opened.config.labels == ("neg", "pos")
  assert type(opened.module) is type(model.module)
  assert opened.tokenizer_dir == str(tmp_path / "ckpt")
  _same(opened.params, model.params)
  np.testing.assert_array_equal(opened(input_ids=IDS)["logits"], model(input_ids=IDS)["logits"])


def test_a_nested_config_object_comes_back_equal(tmp_path):
  """BigBird's `attention` spec is a dataclass: recorded by its class and fields."""
  config = bigbird.BigBirdConfig(**TINY, attention=sparse.BigBird(block_size=4,
                                                                  num_random_blocks=1))
  record.write(tmp_path, record.Record("big_bird", "BigBirdForMaskedLM", config))
  fields = json.loads((tmp_path / record.FILE).read_text())["config"]["fields"]
  assert fields["attention"]["class"] == "bertjax.layers.long_attention.sparse.BigBird"
  assert record.read(tmp_path).config == config


def test_sbert_export_writes_the_record(tmp_path):
  encoder = _model("BertModel")
  sbert_io.save_sentence_model(tmp_path / "sbert", encoder, sbert_io.SentenceConfig(),
                               tokenizer_from=_vocab(tmp_path / "vocab"))
  assert (tmp_path / "sbert" / record.FILE).is_file()
  opened = open_model(tmp_path / "sbert")
  assert opened.architecture == "BertModel" and opened.config == encoder.config
  _same(opened.params, encoder.params)


def test_the_trainer_records_what_open_model_gives(tmp_path):
  start = run_start.StartPoint(None, {})
  run_start.record_model(str(tmp_path / "bert"), bert.BertForPreTraining(bert.BertConfig(**TINY)),
                         start, 0)
  written = record.read(tmp_path / "bert")
  assert (written.family, written.architecture, written.weights) == (
      "bert", "BertForPreTraining", "checkpoints")
  pair = StudentTeacher(distilbert.DistilBertForMaskedLM(distilbert.DistilBertConfig(**TINY)),
                        bert.BertForMaskedLM(bert.BertConfig(**TINY)))
  run_start.record_model(str(tmp_path / "pair"), pair, start, 0)
  written = record.read(tmp_path / "pair")
  assert (written.family, written.architecture, written.subtree) == (
      "distilbert", "DistilBertForMaskedLM", "student")
  joint = electra.ElectraGeneratorDiscriminator(electra.ElectraConfig(**TINY, dtype="bfloat16"))
  run_start.record_model(str(tmp_path / "electra"), joint, start, 0)
  written = record.read(tmp_path / "electra")
  assert (written.architecture, written.dtype) == ("ElectraForPreTraining", "bfloat16")
  assert written.cut_from == "bertjax.models.electra.model.ElectraGeneratorDiscriminator"
  # A model no family opens (ELMo) gets the resume record only.
  run_start.record_model(str(tmp_path / "elmo"), elmo.ElmoBiLM(elmo.elmo_tiny()), start, 0)
  assert sorted(os.listdir(tmp_path / "elmo")) == ["model_config.json"]


def test_electra_stage_two_records_its_discriminator(tmp_path):
  params = run_dirs.fake_run(tmp_path / "run", "electra_small",
                             overrides=", 'generator_fraction': 1.0")[7]
  electra_stage_two.prepare_second_stage(str(tmp_path / "run"), str(tmp_path / "init"))
  model = open_model(tmp_path / "init")
  assert model.architecture == "ElectraForPreTraining" and model.tokenizer_dir is None
  assert "cut from ElectraGeneratorDiscriminator" in model.origin
  _same(model.params, electra.discriminator_params(electra.discriminator_from_generator(params)))


@pytest.mark.parametrize("random_student", [False, True])
def test_distilbert_init_records_its_student(tmp_path, random_student):
  run_dirs.fake_run(tmp_path / "run", "bert_tiny")
  teacher = open_model(tmp_path / "run")
  config, chosen = distilbert_init.write_init_checkpoint(str(tmp_path / "run"),
                                                         str(tmp_path / "init"), None,
                                                         random_student)
  model = open_model(tmp_path / "init")
  if random_student:  # only the teacher is there
    assert (model.architecture, model.config) == (teacher.architecture, teacher.config)
    _same(model.params, jax.device_get(teacher.params))
  else:
    assert (model.family.name, model.architecture) == ("distilbert", "DistilBertForMaskedLM")
    assert model.config == config and "student/" in model.origin
    _same(model.params, distilbert.student_params_from_teacher(
        jax.device_get(teacher.params), chosen))


# ------------------------------------------------------------------ old folders
def test_a_converted_checkpoint_without_a_record_opens_through_the_upgrade(tmp_path):
  model = _model(labels=("a", "b", "c"))
  converted.save(model, tmp_path / "ckpt", source="s")
  recorded = record.read(tmp_path / "ckpt")
  (tmp_path / "ckpt" / record.FILE).unlink()  # as convert wrote it before the record
  upgraded, folder = record.upgrade(tmp_path / "ckpt")
  assert folder == str(tmp_path / "ckpt") and upgraded == recorded
  opened = open_model(tmp_path / "ckpt")
  assert opened.config == model.config and opened.origin == "converted checkpoint"
  np.testing.assert_array_equal(opened(input_ids=IDS)["logits"], model(input_ids=IDS)["logits"])


def test_a_run_without_a_record_upgrades_to_the_record_the_trainer_writes(tmp_path):
  run_dirs.fake_run(tmp_path / "new", "distilbert_base")
  run_dirs.fake_run(tmp_path / "old", "distilbert_base", recorded=False)
  upgraded, folder = record.upgrade(tmp_path / "old" / "checkpoints" / "7")
  assert folder == str(tmp_path / "old") and upgraded == record.read(tmp_path / "new")
  with pytest.raises(FileNotFoundError, match="neither a converted checkpoint"):
    record.upgrade(tmp_path)
  assert legacy.model_dir_of(str(tmp_path / "new" / "checkpoints")) == str(tmp_path / "new")


# ------------------------------------------------------------------ damaged records
@pytest.fixture(name="ckpt")
def _ckpt(tmp_path):
  converted.save(_model(), tmp_path / "ckpt")
  return tmp_path / "ckpt"


def _tamper(ckpt, change):
  data = json.loads((ckpt / record.FILE).read_text())
  change(data)
  (ckpt / record.FILE).write_text(json.dumps(data))


@pytest.mark.parametrize("change, match", [
    (lambda d: d.update(family="bort"), r"Unknown model family 'bort'"),
    (lambda d: d.update(architecture="BertForNothing"), r"'BertForNothing' is not supported"),
    (lambda d: d["config"].update({"class": "collections.OrderedDict"}),
     r"config class 'collections.OrderedDict' is not inside the bertjax package"),
    (lambda d: d["config"].update({"class": "bertjax.models.bert.model.NoConfig"}),
     r"cannot be imported"),
    (lambda d: d["config"]["fields"].update(hidden_sise=16),
     r"\['hidden_sise'\] are not fields of bertjax.models.bert.model.BertConfig"),
    (lambda d: d["config"]["fields"].update(num_heads=3), r"does not build a BertConfig"),
    (lambda d: d.pop("weights"), r"has no \['weights'\]"),
    (lambda d: d.update(version=2), r"is version 2 of the model record; this bertjax reads "
                                    r"version 1"),
    (lambda d: d["weights"].update(folder="elsewhere"), r"weights folder 'elsewhere'"),
    (lambda d: d["weights"].update(cut_from="os.path.join"), r"not inside the bertjax package"),
    (lambda d: d.update(tokenizer="../.."), r"tokenizer folder '../..' is not a folder inside"),
])
def test_a_tampered_record_is_refused_naming_the_file(ckpt, change, match):
  _tamper(ckpt, change)
  with pytest.raises((ValueError, FileNotFoundError), match=match) as error:
    open_model(ckpt)
  assert str(ckpt / record.FILE) in str(error.value)


def test_a_config_that_cannot_come_back_is_refused_before_anything_is_written(tmp_path):
  model = _model()
  model = dataclasses.replace(model, config=dataclasses.replace(model.config,
                                                                attention=lambda: None))
  with pytest.raises(ValueError, match=r"Config field config.attention = .* has no JSON form"):
    converted.save(model, tmp_path / "ckpt")
  assert not (tmp_path / "ckpt").exists()
