"""Config fields renamed so that each concept has one name (configurables.RENAMED_FIELDS): what a
run stored under the old names still opens, and a new override under one is refused
naming the new field."""
import dataclasses
import json

import gin
import pytest

from bertjax import configurables
from bertjax.checkpoints import legacy, model_record, record
from bertjax.models import bart, elmo, gpt, t5, xlnet
from bertjax.models.bilstm import BiLSTMConfig
from bertjax.models.word_transformer import WordTransformerConfig

T5_TINY = dict(vocab_size=40, hidden_size=16, head_dim=4, intermediate_size=24, num_layers=1,
               num_decoder_layers=1, num_heads=2, hidden_act="gelu_new", gated=True,
               hidden_dropout=0.0)
GPT_TINY = dict(vocab_size=40, hidden_size=16, num_layers=1, num_heads=2, intermediate_size=32,
                max_position_embeddings=16, hidden_act="relu", initializer_range=0.05)


@pytest.fixture(autouse=True)
def _clean_gin():
  gin.clear_config()
  yield
  gin.clear_config()


def _old_names(config_class: str, fields: dict) -> dict:
  """`fields` as a bertjax of before the renames stored them."""
  old = {new: old for old, new in configurables.RENAMED_FIELDS[config_class].items()}
  return {old.get(k, k): v for k, v in fields.items()}


def test_every_renamed_field_exists_under_its_new_name_only():
  classes = (gpt.GPTConfig, bart.BartConfig, t5.T5Config, xlnet.XLNetConfig, elmo.ElmoConfig,
             WordTransformerConfig, BiLSTMConfig)
  assert sorted(configurables.RENAMED_FIELDS) == sorted(c.__name__ for c in classes)
  for config_class in classes:
    fields = {f.name for f in dataclasses.fields(config_class)}
    for old, new in configurables.RENAMED_FIELDS[config_class.__name__].items():
      assert new in fields and old not in fields, (config_class.__name__, old)


def test_upgrade_renames_old_fields_and_keeps_the_rest():
  old = {"dropout_rate": 0.2, "activation": "relu", "gated": True}
  assert configurables.upgrade_fields("T5Config", old) == {"hidden_dropout": 0.2,
                                                           "hidden_act": "relu", "gated": True}
  # only the class's own renames: BERT never had a field `dropout`
  assert configurables.upgrade_fields("BertConfig", {"dropout": 0.3}) == {"dropout": 0.3}


@pytest.mark.parametrize("family, architecture, config", [
    ("t5", "T5ForConditionalGeneration", t5.T5Config(**T5_TINY)),
    ("gpt2", "GPT2LMHeadModel", gpt.GPTConfig(**GPT_TINY)),
])
def test_a_model_json_with_old_field_names_still_opens(tmp_path, family, architecture, config):
  record.write(tmp_path, record.Record(family, architecture, config))
  path = tmp_path / record.FILE
  data = json.loads(path.read_text())
  data["config"]["fields"] = _old_names(type(config).__name__, data["config"]["fields"])
  path.write_text(json.dumps(data))
  assert set(configurables.RENAMED_FIELDS[type(config).__name__]) <= set(data["config"]["fields"])
  assert record.read(tmp_path).config == config


def test_a_model_config_json_with_old_field_names_is_the_same_model(tmp_path):
  module = t5.T5ForConditionalGeneration(t5.T5Config(**T5_TINY))
  model_record.write(str(tmp_path), module)
  path = tmp_path / model_record.RECORD_FILE
  data = json.loads(path.read_text())
  data["model"] = {k.replace("config.hidden_dropout", "config.dropout_rate")
                   .replace("config.hidden_act", "config.activation"): v
                   for k, v in data["model"].items()}
  path.write_text(json.dumps(data))
  assert "config.dropout_rate" in data["model"]
  assert model_record.changes(str(tmp_path), module) == {}
  with pytest.raises(model_record.ModelChangedError, match=r"config.hidden_dropout 0.0 -> 0.1"):
    model_record.changes(str(tmp_path), t5.T5ForConditionalGeneration(
        t5.T5Config(**{**T5_TINY, "hidden_dropout": 0.1})))


def test_a_stored_config_gin_with_old_override_names_still_builds():
  text = ("build_model.architecture = 'bertjax.models.gpt.GPTLMHeadModel'\n"
          "build_model.config = 'bertjax.models.gpt.gpt2'\n"
          "build_model.config_overrides = {'num_layers': 1, 'activation': 'relu', "
          "'init_std': 0.05}\n")
  [(_, module)] = legacy.run_models(text)
  assert module.config.hidden_act == "relu" and module.config.initializer_range == 0.05


@pytest.mark.parametrize("config, old, new", [
    ("bertjax.models.gpt.gpt2", "activation", "hidden_act"),
    ("bertjax.models.t5.t5_small", "dropout_rate", "hidden_dropout"),
    ("bertjax.models.bart.bart_base", "init_std", "initializer_range"),
])
def test_an_old_name_in_a_gin_override_is_refused_naming_the_new_one(config, old, new):
  with pytest.raises(ValueError, match=rf"\['{old}'\] are not fields of \w+Config "
                                       rf"\('{old}' was renamed '{new}'\)"):
    configurables.build_model("bertjax.models.gpt.GPTLMHeadModel", config, {old: 0.0})
