"""Every family with task classes builds their parameter tables from Family's task hooks."""
import pytest

from bertjax.hf import registry, tasks
from bertjax.hf.family import Family

FAMILIES = sorted(registry.FAMILIES)


def _task_architectures(family) -> list[str]:
  return [a for a in family.architectures if tasks.kind_of(a)]


@pytest.mark.parametrize("model_type", FAMILIES)
def test_task_classes_use_the_default_rules(model_type):
  family = registry.family_for(model_type)
  assert type(family).rules is Family.rules  # no family dispatches on its own
  if not _task_architectures(family):
    return
  config = family.config_class()
  encoder = family.encoder_rules(family.task_encoder_prefix, tasks.ENCODER, config)
  assert family.task_encoder_prefix.endswith(".")
  for architecture in _task_architectures(family):
    kind = tasks.kind_of(architecture)
    table = list(family.rules(architecture, config))
    assert table[:len(encoder)] == encoder, architecture
    pooler = family.pooler_rules(family.task_encoder_prefix, tasks.ENCODER)
    assert all(rule in table for rule in pooler) == (kind in family.pooled_kinds), architecture
    assert {r.ours.split("/")[0] for r in table} == {"encoder", "head"}, architecture
