"""The gin files as the docs compose them.

Every objective file binds its data recipe (`Trainer.train_task`) and never the model;
every model file leaves the recipe and the loss to the objective. Every gin combination of
docs/pretrain.md's recipe table trains a tiny model for 2 steps on its recipe's data, through
the recipe's own vocabulary, which must fit the model's embeddings (combinations that start
from a tool's output run in tests/test_readme.py).
"""
import dataclasses
import importlib
import pathlib
import re
import shlex

import gin
from gin import config_parser
import numpy as np
import pytest
import seqio

from bertjax import configurables, main, paths
from bertjax.train import metrics, trainer
from tests.helpers import docs

GIN_DIR = paths.gin_dir()


@pytest.fixture(autouse=True)
def _clean_gin():
  gin.clear_config()
  yield
  gin.clear_config()


# ----------------------------------------------------------------- bindings of a file
class _Names(config_parser.ParserDelegate):
  """Parses references and macros into their names only (nothing is imported)."""

  def configurable_reference(self, scoped_configurable_name, evaluate):
    return f"@{scoped_configurable_name}"

  def macro(self, macro_name):
    return f"%{macro_name}"


def bindings(relative_path: str) -> list[config_parser.BindingStatement]:
  """The binding statements of a gin file under gin/ and of the files it includes."""
  path = GIN_DIR / relative_path
  found = []
  for statement in config_parser.ConfigParser(path.read_text(), _Names()):
    if isinstance(statement, config_parser.IncludeStatement):
      found += bindings(statement.filename)
    elif isinstance(statement, config_parser.BindingStatement):
      found.append(statement)
  return found


def _binds(statements, selector: str, arg_name: str) -> bool:
  return any((s.selector, s.arg_name) == (selector, arg_name) for s in statements)


def _names(directory: str) -> list[str]:
  return sorted(f"{directory}/{p.name}" for p in (GIN_DIR / directory).glob("*.gin"))


def test_the_parser_sees_includes_scopes_and_references():
  statements = bindings("objectives/albert_mlm_sop.gin")
  assert _binds(statements, "Trainer", "train_task")  # from the included mlm_sop.gin
  scoped = [s for s in bindings("models/distilbert_base.gin") if s.selector == "build_model"]
  assert {s.scope for s in scoped} == {"student", "teacher"}


@pytest.mark.parametrize("name", _names("objectives"))
def test_objective_file_binds_its_recipe_and_never_the_model(name):
  statements = bindings(name)
  recipes = [s.value for s in statements if (s.selector, s.arg_name) == ("Trainer", "train_task")]
  assert recipes and all(isinstance(r, str) and r for r in recipes), name
  model = [f"{s.scope + '/' if s.scope else ''}{s.selector}.{s.arg_name}" for s in statements
           if s.selector.split(".")[-1] == "build_model"
           or (s.selector, s.arg_name) == ("Trainer", "model")]
  assert not model, f"{name} binds the model: {model}; move it to a gin/models/ file"
  # Nor an architecture's output names: objectives read outputs by role (bertjax.outputs).
  output_names = [f"{s.selector}.{s.arg_name}" for s in statements if s.arg_name.endswith("_key")]
  assert not output_names, f"{name} binds model outputs {output_names}"


@pytest.mark.parametrize("name", _names("models"))
def test_model_file_binds_no_recipe_and_no_loss(name):
  statements = bindings(name)
  for arg_name in ("train_task", "eval_task", "objective"):
    assert not _binds(statements, "Trainer", arg_name), (name, arg_name)


@pytest.mark.parametrize("files, check", [
    (["models/bert_base.gin", "models/bert_mlm.gin"],
     lambda model: type(model).__name__ == "BertForMaskedLM" and model.config.num_layers == 12),
    (["models/deberta_v3_base.gin", "models/deberta_emd.gin"],
     lambda model: model.config.enhanced_mask_decoder),
    (["models/electra_small.gin", "models/electra_two_stage.gin"],
     lambda model: model.config.generator_fraction == 1.0),
])
def test_model_variant_files_change_the_model(files, check):
  main.parse_gin(files, [])
  assert check(configurables.build_model()), files


# ----------------------------------------------------------------- the docs' recipes
@dataclasses.dataclass(frozen=True)
class Recipe:
  """One gin combination of the pretraining table (docs/pretrain.md): a backticked span of a row
  that starts with a runs/ file. `args` are its other flags (--gin_bindings=...,
  --model_dir=...): placeholders that a tool's output fills, as in DistilBERT's and
  two-stage ELECTRA's rows; tests/test_readme.py runs those steps in order."""
  name: str
  files: tuple[str, ...]
  args: tuple[str, ...] = ()

  @property
  def id(self) -> str:
    return self.files[1].split("/")[1][:-4] + "+" + self.files[-1].split("/")[1][:-4]


def readme_recipes() -> list[Recipe]:
  """Every gin combination of the pretraining table, in order."""
  section = docs.section("Pretraining recipes")
  recipes = []
  for row in section.splitlines():
    cells = [c.strip() for c in row.strip().strip("|").split("|")]
    if len(cells) != 2 or not cells[1] or set(cells[1]) <= {"-"} or cells[1] == "gin files":
      continue
    for span in re.findall(r"`([^`]+)`", cells[1]):
      tokens = shlex.split(span)
      files = tuple(t for t in tokens if t.endswith(".gin"))
      if files and files[0].startswith("runs/"):
        recipes.append(Recipe(cells[0], files, tuple(t for t in tokens if t not in files)))
  return recipes


RECIPES = readme_recipes()
# Size fields of every family's config and tiny values for them (vocabularies stay: they
# must match the recipe's data).
TINY = dict(hidden_size=32, num_layers=2, num_heads=2, intermediate_size=64, head_dim=16,
            num_decoder_layers=2, embedding_size=16, sbo_position_size=16, mem_len=16,
            encoder_layers=2, decoder_layers=2, encoder_heads=2, decoder_heads=2,
            encoder_ffn_size=64, decoder_ffn_size=64, projection_dim=16, cell_size=32,
            char_embed_dim=4, filters=((1, 4), (2, 8)))
# ELMo's softmax is the word vocabulary (the paper's has 793,471 words): shrunk with it.
ELMO_WORDS = 1000
# A few steps of small batches, a checkpoint at the end, no evaluation.
TINY_RUN = ["Trainer.num_train_steps = 2", "Trainer.batch_size = 8",
            "Trainer.sequence_length = 32", "XLNET_SEQUENCE_LENGTH = 32", "XLNET_REUSE_LEN = 16",
            "Trainer.log_every = 1", "Trainer.checkpoint_every = 2",
            "Trainer.show_progress = False"]


class VocabularyTooLarge(AssertionError):
  """The task's vocabulary has ids the model's embedding table does not have."""


def _check_vocabulary(task_name: str, model) -> None:
  vocabulary = next(iter(seqio.TaskRegistry.get(task_name).output_features.values())).vocabulary
  if vocabulary.vocab_size > model.config.vocab_size:
    raise VocabularyTooLarge(f"task {task_name!r} has a vocabulary of {vocabulary.vocab_size} "
                             f"ids, the model {model.config.vocab_size}")


def test_readme_lists_the_recipes():
  names = [recipe.name for recipe in RECIPES]
  for family in ("BERT", "RoBERTa", "ALBERT", "SpanBERT", "ELECTRA", "DeBERTa", "DistilBERT",
                 "XLNet", "T5", "BART", "GPT"):
    assert any(name.startswith(family) for name in names), family
  for recipe in RECIPES:
    for name in recipe.files:
      assert (GIN_DIR / name).is_file(), name


def shrink_models(sizes: dict | None = None) -> None:
  """Binds every build_model scope's config_overrides to its own plus tiny sizes
  (`sizes`: per-scope extra overrides, e.g. {'teacher/': {'num_layers': 4}})."""
  for scope in ("", "student/", "teacher/"):
    try:
      make_config = gin.query_parameter(f"{scope}build_model.config")
    except ValueError:
      continue
    module, name = make_config.rsplit(".", 1)
    default = getattr(importlib.import_module(module), name)()
    fields = {f.name for f in dataclasses.fields(default)}
    tiny = {k: v for k, v in TINY.items() if k in fields and getattr(default, k) is not None}
    try:
      given = gin.query_parameter(f"{scope}build_model.config_overrides") or {}
    except ValueError:
      given = {}
    with gin.unlock_config():
      gin.bind_parameter(f"{scope}build_model.config_overrides",
                         {**given, **tiny, **(sizes or {}).get(scope, {})})


def train_recipe(files, bindings, model_dir: pathlib.Path, sizes: dict | None = None) -> dict:
  """Trains a tiny model of a gin combination for 2 steps on its recipe's real data path
  (the embedded corpus through the recipe's vocabulary and preprocessors)."""
  if "objectives/bilm.gin" in files:  # ELMo's word softmax: a small vocabulary and model
    bindings = [*bindings, f"lm_word_vocabulary.size = {ELMO_WORDS - 4}"]
    sizes = {**(sizes or {}), "": {**(sizes or {}).get("", {}), "vocab_size": ELMO_WORDS}}
  main.parse_gin(list(files), TINY_RUN + list(bindings))
  shrink_models(sizes)
  job = trainer.Trainer(model_dir=str(model_dir))
  assert job.train_task, f"{files}: no Trainer.train_task"
  summary = job.run("train")
  _check_vocabulary(job.train_task, job.model)
  losses = [row["loss"] for row in metrics.read_metrics(str(model_dir)) if row["split"] == "train"]
  assert summary["step"] == 2 and len(losses) == 2 and np.all(np.isfinite(losses)), losses
  assert job.checkpoints.all_steps() == [2], files
  return summary


@pytest.mark.slow
@pytest.mark.parametrize("recipe", [pytest.param(r, id=r.id) for r in RECIPES if not r.args])
def test_readme_recipe_trains_a_tiny_model_on_its_data(recipe, tmp_path):
  """Rows whose span names a tool's output (`args`) run in tests/test_readme.py."""
  train_recipe(recipe.files, [], tmp_path)
