"""The parity harness: bertjax and transformers agree on an architecture, both ways.

Each family's test file lists its architectures as `Case` rows of one table and turns the
table into one parametrized test with `parametrized(CASES)`. `check(case, tmp_path)`:
  build the transformers model with the row's small, non-default config, redraw every weight
  with std 0.2, save_pretrained -> `bertjax.from_hf` -> compare the row's outputs on its padded
  batches -> `bertjax.to_hf` -> transformers' from_pretrained -> compare again -> `from_hf` of
  the export reads back exactly the same parameters.
Adding an architecture is adding a row.
"""
import dataclasses
from typing import Any, Mapping, Sequence

import jax
import numpy as np
import pytest

import bertjax
from tests.helpers import hf

MISSING = object()  # an `expect` value: the looked-up attribute or key does not exist


@dataclasses.dataclass(frozen=True, eq=False)
class Case:
  """One architecture checked against transformers: a row of a family's table."""
  model_class: type  # the transformers class, e.g. transformers.BertForMaskedLM
  config: Mapping[str, Any]  # keyword arguments of model_class.config_class
  # The compared outputs; the first must vary across tokens (std > min_std). Naming any
  # `...hidden_states` asks both models for their hidden states.
  outputs: tuple[str, ...]
  inputs: Sequence[dict]  # the batches compared after from_hf
  export_inputs: Sequence[dict] | None = None  # the batches compared after to_hf (or inputs)
  name: str = ""  # the test id and directory name (default: the class name)
  seed: int = 0  # of the weight redraw
  tolerance: float = 1e-4  # bertjax against transformers
  export_tolerance: float = 1e-5  # transformers' reload of the export against the original
  min_std: float = 0.1
  # Dotted attribute / key of the loaded bertjax model -> its expected value (or MISSING).
  expect: Mapping[str, Any] = dataclasses.field(default_factory=dict)
  # Dotted attribute of the reloaded transformers config -> its expected value.
  expect_exported: Mapping[str, Any] = dataclasses.field(default_factory=dict)
  carries_memory: bool = False  # each batch reads the previous batch's `mems` (XLNet)
  training_mode: bool = False  # also compared in training mode (dropout 0; BigBird's plans)
  redraw_buffers: tuple[str, ...] = ()  # buffers redrawn too (BART's final_logits_bias)
  # from_pretrained's keyword arguments for the export's reload, e.g. the `config`'s own
  # attn_implementation="eager" (SDPA and eager disagree on padding queries whose keys are
  # all masked, as in a sliding window beyond a row's end).
  reload_kwargs: Mapping[str, Any] = dataclasses.field(default_factory=dict)

  @property
  def id(self) -> str:
    return self.name or self.model_class.__name__

  @property
  def call_kwargs(self) -> dict:
    wants_hidden = any(k.endswith("hidden_states") for k in self.outputs)
    return {"output_hidden_states": True} if wants_hidden else {}


def table(*cases: Case) -> dict[str, Case]:
  """The rows by id (family tests look up the reference models they need by id)."""
  rows = {case.id: case for case in cases}
  assert len(rows) == len(cases), "two rows share an id; give them names"
  return rows


def parametrized(cases: Mapping[str, Case]):
  """A family's parametrized parity test: one `check` per row, the row's id as test id."""

  @pytest.mark.parametrize("case", list(cases.values()), ids=lambda case: case.id)
  def test_matches_transformers_and_round_trips(case, tmp_path):
    check(case, tmp_path)

  return test_matches_transformers_and_round_trips


def encoder_batches(vocab_size: int, **padded_batch_kwargs) -> dict:
  """`inputs` / `export_inputs` of an encoder row: one padded batch each (seeds 0 and 5)."""
  return {"inputs": [hf.padded_batch(vocab_size, seed=0, **padded_batch_kwargs)],
          "export_inputs": [hf.padded_batch(vocab_size, seed=5, **padded_batch_kwargs)]}


def save_reference(case: Case, directory):
  """(the row's transformers model with redrawn weights, the directory it is saved in)."""
  model = hf.reference_model(case.model_class, case.config, case.seed,
                             buffers=case.redraw_buffers)
  path = directory / case.id
  model.save_pretrained(path)
  return model, path


def check(case: Case, tmp_path) -> None:
  reference, path = save_reference(case, tmp_path)
  ours = bertjax.from_hf(path)
  calls = check_loaded(case, reference, ours)
  check_exported(case, reference, ours, calls, tmp_path / "exported")


def check_loaded(case: Case, reference, ours) -> list[tuple[dict, dict]]:
  """bertjax's copy of `reference` gives its outputs; returns the compared calls."""
  assert ours.architecture == case.model_class.__name__
  assert_expected(ours, case.expect)
  calls = reference_calls(case, reference, case.inputs)
  for inputs, expected in calls:
    got = ours(**inputs, **case.call_kwargs)
    assert set(got) <= set(expected), f"outputs transformers does not give: {set(got)}"
    assert_close(got, expected, case.outputs, case.tolerance)
    # The check is not vacuous: outputs vary strongly across tokens.
    assert np.std(got[case.outputs[0]]) > case.min_std
  if case.training_mode:
    reference.train()
    for inputs, _ in calls:
      assert_close(ours(**inputs, **case.call_kwargs, deterministic=False),
                   hf.torch_outputs(reference, inputs, **case.call_kwargs), case.outputs,
                   case.tolerance)
    reference.eval()
  return calls


def check_exported(case: Case, reference, ours, calls, path) -> None:
  """`to_hf(ours)` loads in transformers with `reference`'s outputs, and from_hf reads it back
  to the same parameters."""
  bertjax.to_hf(ours, path)
  reloaded = case.model_class.from_pretrained(path, **case.reload_kwargs).eval()
  assert_expected(reloaded.config, case.expect_exported)
  if case.export_inputs is not None:
    calls = reference_calls(case, reference, case.export_inputs)
  for inputs, expected in calls:
    assert_close(hf.torch_outputs(reloaded, inputs, **case.call_kwargs), expected, case.outputs,
                 case.export_tolerance)
  again = bertjax.from_hf(path)
  assert all(jax.tree.leaves(jax.tree.map(np.array_equal, ours.params, again.params)))


def reference_calls(case: Case, reference, batches: Sequence[dict]) -> list[tuple[dict, dict]]:
  """(inputs, transformers' outputs) per batch; with `carries_memory`, every batch after
  the first also reads the `mems` that transformers returned for the one before."""
  calls = []
  for batch in batches:
    if calls and case.carries_memory:
      batch = {**batch, "mems": calls[-1][1]["mems"]}
    calls.append((batch, hf.torch_outputs(reference, batch, **case.call_kwargs)))
  return calls


def assert_close(got: dict, expected: dict, keys, tolerance: float) -> None:
  shapes = {k: (np.shape(got[k]), np.shape(expected[k])) for k in keys}
  assert all(ours == theirs for ours, theirs in shapes.values()), shapes
  diffs = hf.max_abs_diff(got, expected, keys)
  assert max(diffs.values()) <= tolerance, diffs


def assert_expected(obj, expectations: Mapping[str, Any]) -> None:
  for dotted, value in expectations.items():
    found = lookup(obj, dotted)
    if value is MISSING:
      assert found is MISSING, f"{dotted} exists"
    else:
      assert found == value, f"{dotted} is {found!r}, expected {value!r}"


def lookup(obj, dotted: str):
  """`obj.a.b` or `obj.a["b"]` for dotted "a.b"; MISSING where the last part does not exist
  (an earlier part must exist, so that a MISSING expectation is not met by a typo)."""
  *path, last = dotted.split(".")
  for part in path:
    obj = obj[part] if isinstance(obj, Mapping) else getattr(obj, part)
  return obj.get(last, MISSING) if isinstance(obj, Mapping) else getattr(obj, last, MISSING)


# Task classes: 3 classes with their own names (id2label both ways), 5 token labels.
SEQUENCE_LABELS = {0: "negative", 1: "neutral", 2: "positive"}


def choice_batch(vocab_size: int, choices: int = 3, lengths=(11, 7, 3, 9, 5, 11),
                 **padded_batch_kwargs) -> dict:
  """A [batch, choices, length] batch: the padded rows of `lengths`, `choices` per example."""
  rows = hf.padded_batch(vocab_size, lengths, **padded_batch_kwargs)
  return {k: v.reshape(-1, choices, v.shape[-1]) for k, v in rows.items()}


def task_cases(prefix: str, config: Mapping[str, Any], batches: dict, choices: dict,
               kinds=("ForSequenceClassification", "ForTokenClassification",
                      "ForQuestionAnswering", "ForMultipleChoice"), extra_outputs=(),
               **case_kwargs) -> list[Case]:
  """One row per task class transformers has for the family `prefix` ('Bert', ...):
  sequence classification over 3 named labels, token classification over 5, question
  answering, multiple choice on `choices` ([batch, choices, length] `inputs` /
  `export_inputs`); the others on `batches`. Each compares its head's outputs and
  `extra_outputs`; `case_kwargs` go to every row."""
  import transformers
  expect = case_kwargs.pop("expect", {})
  expect_exported = case_kwargs.pop("expect_exported", {})
  cases = []
  for kind in kinds:
    model_class = getattr(transformers, f"{prefix}{kind}")
    row = dict(case_kwargs, expect=dict(expect), expect_exported=dict(expect_exported))
    row.update(choices if kind == "ForMultipleChoice" else batches)
    outputs = (("start_logits", "end_logits") if "QuestionAnswering" in kind else ("logits",))
    outputs += tuple(extra_outputs)
    if kind == "ForSequenceClassification":
      config_of_row = dict(config, id2label=SEQUENCE_LABELS)
      row["expect"]["config.labels"] = tuple(SEQUENCE_LABELS.values())
      row["expect_exported"].update(id2label=SEQUENCE_LABELS,
                                    label2id={v: k for k, v in SEQUENCE_LABELS.items()})
    elif kind == "ForTokenClassification":
      config_of_row = dict(config, num_labels=5)
      row["expect_exported"]["num_labels"] = 5
    else:
      config_of_row = config
    cases.append(Case(model_class, config_of_row, outputs, **row))
  return cases


def choice_batches(vocab_size: int, **padded_batch_kwargs) -> dict:
  """`inputs` / `export_inputs` of a multiple-choice row (seeds 0 and 5)."""
  return {"inputs": [choice_batch(vocab_size, seed=0, **padded_batch_kwargs)],
          "export_inputs": [choice_batch(vocab_size, seed=5, **padded_batch_kwargs)]}
