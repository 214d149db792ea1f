"""The model a run records in its model_dir, and what a resume may change about it."""
import json

import pytest

from bertjax import checkpoints
from bertjax.checkpoints import model_record
from bertjax.models import bert, distilbert
from bertjax.models.common import distillation


def _pair(student_dropout=0.1, teacher_layers=2, remat=False, scan_unroll=1):
  student = distilbert.DistilBertForMaskedLM(distilbert.distilbert_base(
      num_layers=1, hidden_size=16, num_heads=2, hidden_dropout=student_dropout, remat=remat,
      scan_unroll=scan_unroll))
  teacher = bert.BertForMaskedLM(bert.bert_tiny().replace(num_layers=teacher_layers))
  return distillation.StudentTeacher(student, teacher, ("logits",))


def test_describe_flattens_nested_modules_and_configs():
  described = model_record.describe(_pair())
  assert described["architecture"] == "StudentTeacher"
  assert described["student.architecture"] == "DistilBertForMaskedLM"
  assert described["student.config.type"] == "DistilBertConfig"
  assert described["student.config.num_layers"] == 1
  assert described["teacher.config.num_layers"] == 2
  assert described["teacher_outputs"] == ["logits"]
  # Neither changes what the model computes.
  assert "student.config.remat" not in described
  assert "student.config.scan_unroll" not in described
  assert json.loads(json.dumps(described)) == described
  assert model_record.describe(_pair()) == described  # stable: no object addresses


def test_changes_are_refused_unless_allowed_by_name(tmp_path):
  model_record.write(str(tmp_path), _pair())
  assert model_record.changes(str(tmp_path), _pair(remat=True)) == {}
  assert model_record.changes(str(tmp_path), _pair(scan_unroll=2)) == {}
  with pytest.raises(model_record.ModelChangedError,
                     match=r"student.config.hidden_dropout 0.1 -> 0.0, teacher.config.num_layers "
                           r"2 -> 4\. .*Trainer.allow_config_change = \('hidden_dropout', "
                           r"'num_layers'\)"):
    model_record.changes(str(tmp_path), _pair(0.0, teacher_layers=4))
  with pytest.raises(model_record.ModelChangedError, match=r"^(?!.*hidden_dropout).*num_layers"):
    model_record.changes(str(tmp_path), _pair(0.0, teacher_layers=4), ["hidden_dropout"])
  changed = model_record.changes(str(tmp_path), _pair(0.0), ["student.config.hidden_dropout"])
  assert changed == {"student.config.hidden_dropout": [0.1, 0.0]}
  model_record.write(str(tmp_path), _pair(0.0), step=30, changed=changed)
  with open(tmp_path / model_record.RECORD_FILE) as f:
    record = json.load(f)
  assert record["changes"] == [{"step": 30, "fields": changed}]
  assert model_record.changes(str(tmp_path), _pair(0.0)) == {}  # the new model is the record


def test_an_unreadable_record_is_named(tmp_path):
  (tmp_path / model_record.RECORD_FILE).write_text("{oops")
  with pytest.raises(checkpoints.CheckpointError,
                     match=r"model_config.json is unreadable .*new --model_dir"):
    model_record.changes(str(tmp_path), _pair())
  assert model_record.changes(str(tmp_path / "none"), _pair()) == {}  # nothing recorded yet
