"""The gin files as the README composes them.

Every objective file binds its data recipe (`Trainer.train_task`) and never the model;
every model file leaves the recipe and the loss to the objective. Each pretraining recipe
row of the README parses, builds its Trainer shrunk to a tiny model, reads a first batch of
its task, and its objective computes a loss over the model's outputs (shapes only).
"""
import dataclasses
import importlib
import pathlib
import re

import gin
from gin import config_parser
import jax
import numpy as np
import pytest
import seqio

from bertjax import configurables, main, paths
from bertjax.train import inputs as train_inputs, state as train_state, trainer

GIN_DIR = paths.gin_dir()
README = paths.REPO_ROOT / "README.md"


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
  assert _binds(statements, "SentencePair", "logits_key")
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


# ----------------------------------------------------------------- README recipes
def readme_recipes() -> list[tuple[str, list[str]]]:
  """(recipe, gin files) of each combination in the README's pretraining table: every
  backticked span of a row that starts with a runs/ file."""
  section = README.read_text().split("## Pretraining recipes", 1)[1].split("\n## ", 1)[0]
  recipes = []
  for row in section.splitlines():
    cells = [c.strip() for c in row.strip().strip("|").split("|")]
    if len(cells) != 2 or not cells[1] or set(cells[1]) <= {"-"} or cells[1] == "gin files":
      continue
    for span in re.findall(r"`([^`]+)`", cells[1]):
      files = [t for t in span.split() if t.endswith(".gin")]
      if files and files[0].startswith("runs/"):
        recipes.append((cells[0], files))
  return recipes


RECIPES = readme_recipes()
# Size fields of every family's config and tiny values for them (vocabularies stay: they
# must match the recipe's data).
TINY = dict(hidden_size=32, num_layers=2, num_heads=2, intermediate_size=64, head_dim=16,
            num_decoder_layers=2, embedding_size=16, sbo_position_size=16, mem_len=16,
            encoder_layers=2, decoder_layers=2, encoder_heads=2, decoder_heads=2,
            encoder_ffn_size=64, decoder_ffn_size=64)
VOCABULARY_ISSUE = ("the recipe's default vocabulary (BERT's uncased WordPiece, 30,522 ids) is "
                    "larger than the model's vocab_size (ALBERT's SentencePiece: 30,000; "
                    "SpanBERT's cased WordPiece: 28,996); the family's own vocabulary is not "
                    "bound yet")
XFAIL = {"runs/albert_pretrain.gin", "runs/spanbert_pretrain.gin"}


class VocabularyTooLarge(AssertionError):
  """The task's vocabulary has ids the model's embedding table does not have."""


def _check_vocabulary(task_name: str, model, batch: dict) -> None:
  vocabulary = next(iter(seqio.TaskRegistry.get(task_name).output_features.values())).vocabulary
  model_size = model.config.vocab_size
  if vocabulary.vocab_size > model_size or batch["input_ids"].max() >= model_size:
    raise VocabularyTooLarge(f"task {task_name!r} has a vocabulary of {vocabulary.vocab_size} "
                             f"ids, the model {model_size}")


def test_readme_lists_the_recipes():
  names = [name for name, _ in RECIPES]
  for family in ("BERT", "RoBERTa", "ALBERT", "SpanBERT", "ELECTRA", "DeBERTa", "DistilBERT",
                 "XLNet", "T5", "BART", "GPT"):
    assert any(name.startswith(family) for name in names), family
  for _, files in RECIPES:
    for name in files:
      assert (GIN_DIR / name).is_file(), name


def _shrink_models() -> None:
  """Binds every build_model scope's config_overrides to its own plus tiny sizes."""
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
      gin.bind_parameter(f"{scope}build_model.config_overrides", {**given, **tiny})


def _build_and_read(files: list[str], model_dir: pathlib.Path) -> dict:
  main.parse_gin(files, ["Trainer.num_train_steps = 2", "Trainer.batch_size = 8",
                         "Trainer.sequence_length = 32", "XLNET_SEQUENCE_LENGTH = 32",
                         "XLNET_REUSE_LEN = 16", "Trainer.show_progress = False",
                         "PHASE1_DIR = '/phase1'"])  # (read by BERT's phase 2 when training)
  _shrink_models()
  job = trainer.Trainer(model_dir=str(model_dir))
  assert job.train_task, f"{files}: no Trainer.train_task"
  batch = next(train_inputs.iterate(job.data_fn(
      job.train_task, split="train", batch_size=job.batch_size,
      sequence_length=job.sequence_length, seed=0, shard_id=0, num_shards=1)))
  _check_vocabulary(job.train_task, job.model, batch)
  model_inputs = job.objective.model_inputs(batch)
  params = jax.eval_shape(train_state.init_params_fn(job.model, batch,
                                                     job.objective.model_inputs),
                          jax.random.key(0))
  rngs = {name: jax.random.key(1) for name in ("dropout",) + job.objective.rng_names}
  outputs = jax.eval_shape(lambda p: job.model.apply({"params": p}, **model_inputs, rngs=rngs),
                           params)
  loss, metrics = jax.eval_shape(job.objective, outputs, batch)
  assert loss.shape == () and metrics, files
  return batch


@pytest.mark.slow
@pytest.mark.parametrize("recipe, files", [
    pytest.param(name, files, id=files[1].split("/")[1][:-4] + "+" + files[-1].split("/")[1][:-4],
                 marks=[pytest.mark.xfail(strict=True, raises=VocabularyTooLarge,
                                          reason=VOCABULARY_ISSUE)] if files[0] in XFAIL else [])
    for name, files in RECIPES])
def test_readme_recipe_builds_reads_its_task_and_computes_a_loss(recipe, files, tmp_path):
  batch = _build_and_read(files, tmp_path)
  assert batch["input_ids"].shape[0] == 8 and np.all(batch["input_ids"] >= 0), recipe
