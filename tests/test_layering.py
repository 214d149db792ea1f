"""Imports run one way: no module imports a package above its own, and no module loop.

Every `import` / `from ... import` of bertjax counts, also those inside functions (a local
import only hides a loop until the day the two modules load in the other order). Importing
`a.b.c` runs the `__init__` of `a.b` too, so that counts as importing `a.b`.
"""
import ast
import collections
import pathlib
import sys

import bertjax

PACKAGE = pathlib.Path(bertjax.__file__).parent

# bertjax's top-level modules and packages, lowest first: each may import only those
# before it (docs/develop.md, "Layout", says the same in words).
ORDER = (
    # below everything: the API's lazy names, files and paths, the batch and output contracts
    "quiet", "progress", "__init__", "paths", "files", "characters", "batch", "outputs",
    "output_paths", "run_lock", "configurables", "cli",
    # blocks, the bridge kernel, the families, generation, metrics, data
    "layers", "hf", "models", "inference", "evaluation", "data",
    # the runnable model over every format; losses; the one loop
    "checkpoints", "objectives", "train", "main",
    # what runs on the loop and the models
    "finetune", "sbert", "encode", "search", "tools", "convert", "predict",
    "distill", "analysis", "tables",
    "__main__",  # `bertjax COMMAND`: every command above
)


def _modules() -> dict[str, pathlib.Path]:
  modules = {}
  for path in PACKAGE.rglob("*.py"):
    parts = ("bertjax",) + path.relative_to(PACKAGE).with_suffix("").parts
    modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
  return modules


def _imports(modules: dict[str, pathlib.Path]) -> dict[str, set[str]]:
  """module -> the bertjax modules (and packages) importing it runs."""
  edges = collections.defaultdict(set)
  for name, path in modules.items():
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
      if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
        targets = [f"{node.module}.{alias.name}" for alias in node.names] + [node.module]
      elif isinstance(node, ast.Import):
        targets = [alias.name for alias in node.names]
      else:
        continue
      for target in targets:
        while target.startswith("bertjax."):  # the module and every package above it
          if target in modules and target != name and not name.startswith(target + "."):
            edges[name].add(target)
          target = target.rsplit(".", 1)[0]
  return edges


def _unit(module: str) -> str:
  parts = module.split(".")
  return parts[1] if len(parts) > 1 else "__init__"


def test_every_top_level_unit_has_a_place_in_the_order():
  units = {_unit(m) for m in _modules()}
  assert units == set(ORDER), (f"not in ORDER: {sorted(units - set(ORDER))}; "
                               f"gone from bertjax: {sorted(set(ORDER) - units)}")


def test_no_module_imports_one_above_it():
  rank = {unit: i for i, unit in enumerate(ORDER)}
  upward = sorted(f"{module} imports {target}"
                  for module, targets in _imports(_modules()).items() for target in targets
                  if _unit(target) != _unit(module) and rank[_unit(target)] > rank[_unit(module)])
  assert not upward, "upward imports (see ORDER):\n" + "\n".join(upward)


def test_no_import_loop():
  edges = _imports(_modules())
  state: dict[str, str] = {}  # 'open' while on the current path, then 'done'

  def loop_from(module: str, path: list[str]) -> list[str] | None:
    state[module] = "open"
    for target in sorted(edges[module]):
      if state.get(target) == "open":
        return path[path.index(target):] + [target] if target in path else [module, target]
      if target not in state:
        found = loop_from(target, path + [target])
        if found:
          return found
    state[module] = "done"
    return None

  for module in sorted(_modules()):
    if module not in state:
      found = loop_from(module, [module])
      assert found is None, "import loop: " + " -> ".join(found)


def test_the_checks_see_an_upward_import_and_a_loop(tmp_path, monkeypatch):
  """The checks above fail where they should: on a tree with a loop through a package
  __init__ and a local import, as data/lm_word_vocabulary.py once had."""
  fake = tmp_path / "bertjax"
  (fake / "data" / "recipes").mkdir(parents=True)
  (fake / "__init__.py").write_text("")
  (fake / "data" / "__init__.py").write_text("")
  (fake / "data" / "vocab.py").write_text(
      "def f():\n  from bertjax.data.recipes import registry\n")
  (fake / "data" / "recipes" / "__init__.py").write_text("from bertjax.data.recipes import bilm\n")
  (fake / "data" / "recipes" / "bilm.py").write_text("from bertjax.data import vocab\n")
  (fake / "data" / "recipes" / "registry.py").write_text("import bertjax.train\n")
  (fake / "train.py").write_text("")
  monkeypatch.setattr(sys.modules[__name__], "PACKAGE", fake)
  edges = _imports(_modules())
  assert "bertjax.data.recipes" in edges["bertjax.data.vocab"]  # the package __init__ runs
  assert "bertjax.train" in edges["bertjax.data.recipes.registry"]
  rank = {unit: i for i, unit in enumerate(ORDER)}
  assert rank["train"] > rank["data"]  # so registry's import is an upward one
  try:
    test_no_import_loop()
  except AssertionError as error:
    assert "bertjax.data.vocab" in str(error) and "bertjax.data.recipes" in str(error)
  else:
    raise AssertionError("the loop vocab -> recipes -> bilm -> vocab went unseen")
