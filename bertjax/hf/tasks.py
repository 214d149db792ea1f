"""The bridge's side of transformers' task classes (<Family>ForSequenceClassification, ...).

A task class is named by its family's prefix and a *kind*. Every family keeps its task
models' encoder under `encoder/` and the head under `head/` (models.common.task_heads),
and says in a short table which transformers layers the head's `dense` and `out` are.
config.json carries the labels (`id2label` / `label2id`, `num_labels`) and
`problem_type`; configs hold them as `labels` (names in id order) and `problem_type`.
"""
from typing import Any, Mapping

from bertjax.hf.mapping import Rule, linear

# config.problem_type's values (transformers' own); None lets the labels decide.
PROBLEM_TYPES = (None, "regression", "single_label_classification", "multi_label_classification")

# kind -> the outputs of its classes (as transformers names them).
KINDS: dict[str, tuple[str, ...]] = {
    "ForSequenceClassification": ("logits",),
    "ForTokenClassification": ("logits",),
    "ForQuestionAnswering": ("start_logits", "end_logits"),
    "ForQuestionAnsweringSimple": ("start_logits", "end_logits"),
    "ForMultipleChoice": ("logits",),
}
QUESTION_ANSWERING = ("ForQuestionAnswering", "ForQuestionAnsweringSimple")
# Where our task models keep their encoder (and `head/` their head).
ENCODER = "encoder/"


def kind_of(architecture: str) -> str | None:
  """'ForSequenceClassification' for 'BertForSequenceClassification'; None for other classes."""
  return next((k for k in KINDS if architecture.endswith(k)), None)


def architectures(prefix: str, kinds) -> dict[str, tuple[str, ...]]:
  """A family's `architectures` entries for its task classes, e.g. prefix 'Bert'."""
  return {f"{prefix}{kind}": KINDS[kind] for kind in kinds}


def architecture_for(family, kind: str) -> str | None:
  """The family's class of `kind` (question answering: either kind), if it has one."""
  kinds = QUESTION_ANSWERING if kind in QUESTION_ANSWERING else (kind,)
  return next((a for k in kinds for a in family.architectures if kind_of(a) == k), None)


def head_rules(dense: str | None, out: str) -> list[Rule]:
  """The head of a task model: its hidden `dense` layer (None: it has none) and `out`."""
  return (linear(dense, "head/dense") if dense else []) + linear(out, "head/out")


def label_values(hf_config: Mapping[str, Any], source: str = "config.json") -> dict[str, Any]:
  """`labels` (names in id order) and `problem_type` from config.json's fields."""
  values: dict[str, Any] = {}
  id2label = hf_config.get("id2label")
  if id2label:
    try:
      values["labels"] = tuple(str(id2label[str(i)]) for i in range(len(id2label)))
    except KeyError:
      raise ValueError(f"{source}: id2label keys must be the ids 0..{len(id2label) - 1}; got "
                       f"{sorted(id2label)}.") from None
  elif hf_config.get("num_labels"):
    values["labels"] = tuple(f"LABEL_{i}" for i in range(hf_config["num_labels"]))
  problem_type = hf_config.get("problem_type")
  if problem_type is not None and problem_type not in PROBLEM_TYPES:
    raise ValueError(f"{source}: problem_type={problem_type!r}; transformers knows "
                     f"{PROBLEM_TYPES[1:]}.")
  values["problem_type"] = problem_type
  return values


def label_config(config: Any) -> dict[str, Any]:
  """config.json's label fields for `config` (the inverse of `label_values`)."""
  hf = {"id2label": {str(i): name for i, name in enumerate(config.labels)},
        "label2id": {name: i for i, name in enumerate(config.labels)}}
  if config.problem_type is not None:
    hf["problem_type"] = config.problem_type
  return hf
