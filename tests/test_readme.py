"""Every command and snippet the README and the pages of docs/ show, run as written (tiny
sizes, a few steps, offline), so the documentation cannot drift from the code.

- Shell commands (```bash blocks): placeholders (HF_DIR, CKPT, DIR, sents.txt, ...) are filled
  with small real inputs, each `python -m ...` runs in this process as the shell would run it
  (tests/helpers/cli.py: no interpreter start or JAX import per command) with the module's tiny
  overrides appended (TINY_FLAGS), and what it wrote is checked. A command no test here can run
  must be in NOT_RUN with its reason and a cheaper check; a new command that is in neither
  fails test_every_readme_command_has_a_runner.
- Python snippets (```python blocks) run in this process, string placeholders replaced.
- The pretraining table: tests/test_gin_configs.py trains every plain gin combination; the
  rows that chain a tool's output (DistilBERT, two-stage ELECTRA) run here, step by step.
"""
import json
import os
import pathlib
import re
import shlex

import gin
import jax
import numpy as np
import pytest
import torch
import transformers

import bertjax
from bertjax import paths
from bertjax.checkpoints import run as run_checkpoints
from bertjax.train import metrics
from tests import test_gin_configs
from tests.helpers import cli, docs, hf as hf_helpers, sbert as sbert_helpers

# ----------------------------------------------------------------- extraction
fenced_blocks = docs.fenced_blocks


def _without_comment(line: str) -> str:
  return "" if line.lstrip().startswith("#") else re.split(r"\s+#\s", line, maxsplit=1)[0]


def _optional_arguments(command: str) -> str:
  """`[--pooling mean|cls|max]` -> `--pooling mean`: optional arguments are given, with the
  first of their alternatives, so they are exercised too."""
  def first(match):
    return " ".join(token.split("|")[0] for token in match.group(1).split())
  return re.sub(r"\[(--[^\]]+)\]", first, command)


def shell_commands(block: str) -> list[str]:
  """A ```bash block's commands: continuation lines joined, comments dropped, `&&` split."""
  lines = [_without_comment(line) for line in block.replace("\\\n", " ").splitlines()]
  return [_optional_arguments(" ".join(part.split()))
          for line in lines if line.strip() for part in line.split("&&")]


def all_shell_commands() -> list[str]:
  return [command for block in fenced_blocks("bash") for command in shell_commands(block)]


def module_of(command: str) -> str:
  """`python -m a.b ...` -> `a.b`; other commands -> their first two words."""
  tokens = shlex.split(command)
  return tokens[2] if tokens[:2] == ["python", "-m"] else " ".join(tokens[:2])


# ----------------------------------------------------------------- what runs, what does not
# Appended to each module's README command: a few steps of a tiny model, no long evaluations.
_TINY_MODEL = ("build_model.config_overrides = {'hidden_size': 32, 'num_layers': 2, "
               "'num_heads': 2, 'intermediate_size': 64}")
_TINY_RUN = ["Trainer.num_train_steps = 2", "Trainer.batch_size = 8",
             "Trainer.sequence_length = 32", "Trainer.log_every = 1",
             "Trainer.checkpoint_every = 2", "Trainer.eval_every = 2", "Trainer.eval_steps = 1",
             "Trainer.show_progress = False"]
TINY_FLAGS = {
    "bertjax.main": [f"--gin_bindings={b}" for b in _TINY_RUN],
    "bertjax.convert": [],
    "bertjax.encode": ["--progress=false"],
    "bertjax.search": ["--progress=false"],
    "bertjax.finetune.run": ["--max_train_examples=16", "--max_eval_examples=16",
                             "--num_epochs=1", "--max_seq_length=32", "--batch_size=8",
                             "--eval_batch_size=16"],
    "bertjax.sbert.train": ["--nli_fraction=0.0003", "--max_steps=2", "--stsb_epochs=1",
                            "--sick=false", "--eval_poolings=mean", "--batch_size=8",
                            "--max_seq_length=32", "--log_every=1", "--max_eval_pairs=16"],
    "bertjax.predict": [],
    "bertjax.tools.distilbert_init": [],  # Its sizes are the teacher's (a tiny one here).
    "bertjax.tools.electra_stage_two": [],
}
# Commands the test cannot run, why, and what is checked instead.
NOT_RUN = {
    "pip install": "changes the shared Python environment (and needs the package index); "
                   "checked: setup.py declares the `test` extra and .ci/run runs the same line",
    "pytest": "the suite itself (this file is part of it); checked: .ci/run runs this "
                        "exact command and pytest-xdist (-n, --dist) is installed",
}
# Commands another test file reads from the docs and runs (module -> that file).
RUN_ELSEWHERE = {
    "bertjax.distill.student": "tests/distill/test_student.py",
    "bertjax.distill.speed": "tests/distill/test_student.py",
    "bertjax.analysis": "tests/analysis/test_cli.py",
    "bertjax.tables": "tests/tables/test_table_cli.py",
    "python benchmarks/side_by_side.py": "tests/test_benchmarks.py",
    "python benchmarks/gemm_rates.py": "tests/test_benchmarks.py",
    "python benchmarks/profile_step.py": "tests/test_benchmarks.py",
    "python benchmarks/gpu_step.py": "tests/test_benchmarks.py",
    "python benchmarks/finetune_vs_transformers.py": "tests/test_benchmarks.py",
    "python benchmarks/long_attention.py": "tests/test_benchmarks.py",
    "python benchmarks/encoder_family_throughput.py": "tests/test_benchmarks.py",
    "python benchmarks/update_rates.py": "tests/test_benchmarks.py",
}


def test_every_readme_command_has_a_runner():
  commands = all_shell_commands()
  assert len(commands) >= 10, commands
  known = {**TINY_FLAGS, **NOT_RUN, **RUN_ELSEWHERE}
  unknown = [c for c in commands if module_of(c) not in known]
  assert not unknown, (f"README commands without a runner in {__file__}: {unknown}; add their "
                       "module's tiny flags to TINY_FLAGS (or, for a real reason, to NOT_RUN)")
  for module, test_file in RUN_ELSEWHERE.items():
    source = (paths.REPO_ROOT / test_file).read_text()
    reads_docs = re.search(r"^from tests(\.helpers)? import .*\b(docs|test_readme)\b", source, re.M)
    assert reads_docs and module in source, (module, test_file)


def test_install_and_test_commands_are_what_ci_runs():
  """The README's first block: `pip install` and the test run are not run here (NOT_RUN)."""
  first = shell_commands(fenced_blocks("bash", docs.README.read_text())[0])
  assert first[0] == "pip install -e ." and first[2] == 'pip install -e ".[test]"', first
  ci = (paths.REPO_ROOT / ".ci" / "run").read_text()
  assert f"{first[2]} && {first[3]}" in ci, "README and .ci/run disagree on the test command"
  setup = (paths.REPO_ROOT / "setup.py").read_text()
  assert re.search(r'extras_require=\{"test": TEST_REQUIRES\}', setup), "no `test` extra"
  assert "pytest-xdist" in setup
  import xdist  # noqa: F401  `-n 2 --dist loadfile` come from it.
  assert first[1].startswith("python -m bertjax.main --gin_file=gin/quickstart.gin"), first


def test_every_link_between_pages_resolves():
  for page in docs.pages():
    for target in re.findall(r"\]\(([^)#]+)", page.read_text()):
      if "://" not in target:
        assert (page.parent / target).exists(), f"{page.name} links to {target}, which is missing"


# ----------------------------------------------------------------- shell commands, run
@pytest.fixture(scope="module")
def places(tmp_path_factory):
  """Real small inputs for the README's placeholders, and fresh paths for its outputs."""
  root = tmp_path_factory.mktemp("readme")
  hf_dir = sbert_helpers.write_tiny_bert(root / "hf_bert")
  (root / "sents.txt").write_text("a man is playing the guitar\n" * 3 +
                                  "a dog runs on grass\na woman is playing the piano\n" * 20)
  out = lambda name: str(root / name)
  return {"HF_DIR": str(hf_dir), "CKPT_DIR": out("ckpt"), "CKPT": out("ckpt"),
          "EXPORT_DIR": out("export"), "OUT": out("finetune_out"), "sents.txt": out("sents.txt"),
          "emb.npy": out("emb.npy"), "METRICS_DIR": out("sbert_metrics"),
          "/tmp/bertjax_quickstart": out("quickstart"), "...": "a man plays a guitar",
          # DIR: a run's model_dir for bertjax.main, otherwise the model the command reads.
          "--model_dir=DIR": out("bert_run"), "DIR": out("ckpt")}


def filled(command: str, places: dict) -> list[str]:
  """The command's argv with every placeholder (a whole argument or a flag's value) filled."""
  argv = []
  for token in shlex.split(command):
    flag, eq, value = token.partition("=")
    if eq and (token in places or value in places):
      token = f"{flag}={places.get(token, places.get(value))}"
    elif token in places:
      token = places[token]
    argv.append(token)
  return argv


def run_command(command: str, places: dict, extra=()) -> str:
  """Runs the README command (placeholders filled, tiny flags added); returns its stdout."""
  argv = filled(command, places)
  assert argv[:2] == ["python", "-m"], command
  return cli.run_module([*argv[2:], *TINY_FLAGS[argv[2]], *extra])


def _commands_of(module: str) -> list[str]:
  return [c for c in all_shell_commands() if module_of(c) == module]


def _assert_trained(model_dir: str, steps: int = 2) -> None:
  assert run_checkpoints.RunCheckpoints(model_dir).all_steps()[-1] == steps, model_dir
  losses = [row["loss"] for row in metrics.read_metrics(model_dir) if row["split"] == "train"]
  assert len(losses) == steps and np.all(np.isfinite(losses)), losses


@pytest.mark.slow
def test_main_commands_train(places):
  """The quickstart main job and the pretraining section's example, 2 steps each."""
  commands = _commands_of("bertjax.main")
  assert len(commands) == 2, commands
  for command in commands:
    extra = [] if "quickstart.gin" in command else [f"--gin_bindings={_TINY_MODEL}"]
    run_command(command, places, extra)
    model_dir = [t for t in filled(command, places) if t.startswith("--model_dir=")][0]
    _assert_trained(model_dir.split("=", 1)[1])


def _hf_outputs(model_dir: str, inputs: dict) -> np.ndarray:
  reference = transformers.AutoModel.from_pretrained(model_dir).eval()
  return hf_helpers.torch_outputs(reference, inputs)["last_hidden_state"]


@pytest.fixture(scope="module")
def converted(places) -> dict:
  """The README's first `--from_hf` command, run once: the checkpoint (CKPT_DIR, CKPT, DIR)
  that the fine-tuning and sentence-embedding commands read."""
  first = _commands_of("bertjax.convert")[0]
  assert first.split()[3].startswith("--from_hf="), first
  run_command(first, places)
  return places


@pytest.mark.slow
def test_convert_commands_round_trip(converted):
  """`--from_hf` then `--to_hf` (the Hugging Face section's block): the export is the model."""
  commands = _commands_of("bertjax.convert")
  assert {c.split()[3].split("=")[0] for c in commands} == {"--from_hf", "--to_hf"}, commands
  assert all(converted[c] == converted["CKPT_DIR"] for c in ("CKPT", "DIR"))
  # The fine-tuning page repeats the first one (its CKPT is CKPT_DIR here), which made
  # `converted`: run once, as convert refuses to write over its own output.
  done = {tuple(filled(commands[0], converted))}
  for command in commands[1:]:
    if tuple(filled(command, converted)) not in done:
      done.add(tuple(filled(command, converted)))
      run_command(command, converted)
  inputs = hf_helpers.padded_batch(len(sbert_helpers.VOCAB))
  diff = (np.abs(_hf_outputs(converted["EXPORT_DIR"], inputs)
                 - _hf_outputs(converted["HF_DIR"], inputs)))
  assert diff.max() <= 1e-5, diff.max()


@pytest.mark.slow
def test_finetune_command_writes_results_and_predictions(converted):
  # The fine-tuning section's command (the BiLSTM section's teacher run is tests/distill's).
  command = next(c for c in _commands_of("bertjax.finetune.run") if "--output_dir=OUT" in c)
  run_command(command, converted)
  out = pathlib.Path(converted["OUT"])
  results = json.loads((out / "results.json").read_text())
  assert results and (out / "predictions").is_dir(), results
  assert any((out / "predictions").rglob("MRPC*.tsv")), list((out / "predictions").rglob("*"))


@pytest.mark.slow
def test_sentence_embedding_commands(converted):
  """encode, search and sbert.train, in the README's order, on the converted tiny BERT."""
  encode, search, train = (_commands_of(m)[0] for m in
                           ("bertjax.encode", "bertjax.search", "bertjax.sbert.train"))
  run_command(encode, converted)
  lines = pathlib.Path(converted["sents.txt"]).read_text().splitlines()
  assert np.load(converted["emb.npy"]).shape[0] == len(lines)
  found = run_command(search, converted)
  assert "a man is playing the guitar" in found, found
  run_command(train, converted)
  for stage in ("nli", "stsb"):
    rows = metrics.read_metrics(os.path.join(converted["METRICS_DIR"], stage))
    assert rows and all(np.isfinite(row["loss"]) for row in rows if "loss" in row), stage


# ----------------------------------------------------------------- Python snippets, run
@pytest.fixture(scope="module")
def tiny_gpt2(tmp_path_factory) -> str:
  directory = tmp_path_factory.mktemp("gpt2")
  torch.manual_seed(0)
  transformers.GPT2LMHeadModel(transformers.GPT2Config(
      vocab_size=50, n_positions=64, n_embd=16, n_layer=2, n_head=2)).save_pretrained(directory)
  return str(directory)


def _snippet(marker: str) -> str:
  (found,) = [block for block in fenced_blocks("python") if marker in block]
  return found


def _run_snippet(marker: str, replacements: dict, namespace: dict) -> dict:
  code = _snippet(marker)
  for placeholder, value in replacements.items():
    assert placeholder in code, f"README snippet with {marker!r} no longer has {placeholder}"
    code = code.replace(placeholder, value)
  exec(compile(code, f"README.md ({marker} snippet)", "exec"), namespace)
  return namespace


def test_every_python_snippet_is_run():
  markers = ("bertjax.from_hf(\"path/to/hf_dir\")", "bertjax.open_model(", "partitioning.make_mesh",
             "recipes.get_dataset", "m.generate(", "classify = bertjax.pipeline(",
             "bertjax.fine_tune(")
  blocks = fenced_blocks("python")
  assert len(blocks) == len(markers), "a README Python snippet has no test here"
  for block in blocks:
    assert sum(marker in block for marker in markers) == 1, block


def test_hugging_face_snippets(places, tmp_path):
  inputs = hf_helpers.padded_batch(len(sbert_helpers.VOCAB))
  namespace = {"ids": inputs["input_ids"], "mask": inputs["attention_mask"],
               "types": inputs["token_type_ids"]}
  export = str(tmp_path / "export")
  _run_snippet('bertjax.from_hf("path/to/hf_dir")', {
      '"path/to/hf_dir"': repr(places["HF_DIR"]), '"path/to/export"': repr(export)}, namespace)
  want = _hf_outputs(places["HF_DIR"], inputs)
  assert np.abs(namespace["out"]["last_hidden_state"] - want).max() <= 1e-4
  assert np.abs(_hf_outputs(export, inputs) - want).max() <= 1e-5
  _run_snippet("bertjax.open_model(", {'"path"': repr(places["HF_DIR"])}, namespace)
  assert namespace["model"].architecture == "BertModel"
  reference = transformers.AutoTokenizer.from_pretrained(places["HF_DIR"])
  assert namespace["ids"] == reference("a man sleeps", "a person sleeps")["input_ids"]


@pytest.fixture(scope="module")
def classifier(tmp_path_factory) -> str:
  """A fine-tuning's output as the predict page's snippets read it: a text classifier
  whose labels have names."""
  directory = tmp_path_factory.mktemp("classifier")
  torch.manual_seed(0)
  transformers.BertForSequenceClassification(transformers.BertConfig(
      vocab_size=len(sbert_helpers.VOCAB), hidden_size=16, num_hidden_layers=1,
      num_attention_heads=2, intermediate_size=32, max_position_embeddings=64,
      id2label={0: "negative", 1: "positive"}, label2id={"negative": 0, "positive": 1}),
  ).save_pretrained(directory)
  (directory / "vocab.txt").write_text("\n".join(sbert_helpers.VOCAB) + "\n")
  return str(directory)


def test_pipeline_snippet(classifier):
  namespace = _run_snippet("classify = bertjax.pipeline(", {'"OUT"': repr(classifier)},
                           {"bertjax": bertjax})
  found = namespace["classify"]([("a man sleeps", "a person sleeps"), "it rains"], top_k=None)
  assert [{s["label"] for s in scores} for scores in found] == [{"negative", "positive"}] * 2


def test_predict_command(classifier, tmp_path):
  """The predict page's command on a TSV of texts: one prediction per row, by label name."""
  (command,) = _commands_of("bertjax.predict")
  texts = tmp_path / "texts.tsv"
  texts.write_text("text\na man is playing the guitar\na dog runs on grass\n")
  out = tmp_path / "predictions.jsonl"
  run_command(command, {"OUT": classifier, "texts.tsv": str(texts),
                        "predictions.jsonl": str(out)})
  rows = [json.loads(line) for line in out.read_text().splitlines()]
  assert [r["text"] for r in rows] == ["a man is playing the guitar", "a dog runs on grass"]
  assert all(r["prediction"]["label"] in ("negative", "positive") for r in rows), rows


@pytest.mark.slow
def test_fine_tune_snippet(tmp_path):
  """fine_tune on the files the snippet names (texts with labels, tagged tokens, questions),
  from a tiny BERT with the default max_seq_length's positions; each fine-tuned model then
  predicts through its pipeline, by the files' label names."""
  torch.manual_seed(0)
  transformers.BertModel(transformers.BertConfig(
      vocab_size=len(sbert_helpers.VOCAB), hidden_size=16, num_hidden_layers=1,
      num_attention_heads=2, intermediate_size=32, max_position_embeddings=128),
  ).save_pretrained(tmp_path / "ckpt")
  (tmp_path / "ckpt" / "vocab.txt").write_text("\n".join(sbert_helpers.VOCAB) + "\n")
  rows = [("a man is playing the guitar", "positive"), ("a dog runs on grass", "negative")] * 4
  for name in ("train.csv", "dev.csv"):
    (tmp_path / name).write_text("review,sentiment\n" + "".join(f"{t},{s}\n" for t, s in rows))
  tagged = [{"tokens": ["a", "man", "is", "playing"], "tags": ["O", "B-PER", "O", "O"]},
            {"tokens": ["a", "dog", "runs"], "tags": ["O", "B-ANIMAL", "O"]}] * 4
  context = "a man is playing the guitar"
  questions = [{"question": "who is playing", "context": context,
                "answers": {"text": ["a man"], "answer_start": [0]}}] * 8
  for name, lines in (("tags_train.jsonl", tagged), ("tags_dev.jsonl", tagged),
                      ("qa_train.jsonl", questions), ("qa_dev.jsonl", questions)):
    (tmp_path / name).write_text("".join(json.dumps(line) + "\n" for line in lines))
  out = {name: str(tmp_path / name.lower()) for name in ("OUT", "OUT_TAGS", "OUT_QA")}
  files = {f'"{name}"': repr(str(tmp_path / name)) for name in (
      "train.csv", "dev.csv", "tags_train.jsonl", "tags_dev.jsonl", "qa_train.jsonl",
      "qa_dev.jsonl")}
  namespace = _run_snippet("bertjax.fine_tune(", {
      '"CKPT"': repr(str(tmp_path / "ckpt")), **files,
      **{f'"{name}"': repr(path) for name, path in out.items()}}, {"bertjax": bertjax})
  assert namespace["report"]["eval"]["dev"]["examples"] == len(rows)
  results = {name: json.loads(pathlib.Path(path, "results.json").read_text())
             for name, path in out.items()}
  assert [r["task"] for r in results.values()] == ["classification", "token_classification",
                                                   "question_answering"]
  assert results["OUT_TAGS"]["eval"]["dev"]["sentences"] == len(tagged)
  assert results["OUT_QA"]["eval"]["dev"]["questions"] == len(questions)
  found = bertjax.pipeline("text-classification", out["OUT"])("a dog runs on grass")
  assert found["label"] in ("positive", "negative")
  tags = bertjax.pipeline("token-classification", out["OUT_TAGS"])("a man is playing")
  assert {t["entity"] for t in tags} <= {"O", "B-ANIMAL", "B-PER"}


# ----------------------------------------------------------------- table rows with tools

def _row_spans(name: str) -> list[str]:
  """The backticked commands of a pretraining-table row, in order."""
  (row,) = [line for line in docs.section("Pretraining recipes").splitlines()
            if line.startswith(f"| {name} |")]
  return re.findall(r"`([^`]+)`", row.split("|")[2])


def _teacher(directory: pathlib.Path, num_layers: int) -> str:
  """A BERT of bert_base.gin's vocabulary and test_gin_configs.TINY's sizes (DistilBERT's
  teacher: the student takes every other of its layers)."""
  tiny = test_gin_configs.TINY
  transformers.BertForMaskedLM(transformers.BertConfig(
      hidden_size=tiny["hidden_size"], num_hidden_layers=num_layers,
      num_attention_heads=tiny["num_heads"], intermediate_size=tiny["intermediate_size"]),
  ).save_pretrained(directory)
  return str(directory)


# Sizes the tool's output fixes: DistilBERT's student (TINY's 2 layers) is every other
# layer of a 4-layer teacher.
ROW_SIZES = {"DistilBERT": {"teacher/": {"num_layers": 4}}}


@pytest.mark.slow
@pytest.mark.parametrize("name", list(dict.fromkeys(
    r.name.split(" ")[0] for r in test_gin_configs.RECIPES if r.args)))
def test_table_row_with_a_tool_trains(name, tmp_path):
  """Each step of the row in order: its runs (2 steps of a tiny model, in this process) and
  its tools (as commands), the placeholders STAGE_ONE / INIT / BERT_CKPT / PHASE1_MODEL_DIR
  filled."""
  full_name = next(r.name for r in test_gin_configs.RECIPES if r.name.split(" ")[0] == name)
  places = {"STAGE_ONE": str(tmp_path / "stage_one"), "INIT": str(tmp_path / "init"),
            "BERT_CKPT": _teacher(tmp_path / "teacher", 4),
            "PHASE1_MODEL_DIR": str(tmp_path / "phase1")}
  sizes = ROW_SIZES.get(name)
  steps = [span for span in _row_spans(full_name)
           if span.startswith("python -m") or re.search(r"\s--", span)]
  assert steps, full_name
  for number, span in enumerate(steps):
    if span.startswith("python -m"):
      run_command(span, places)
      continue
    tokens = filled(span, places)
    files = [t for t in tokens if t.endswith(".gin")]
    model_dir = next((t.split("=", 1)[1] for t in tokens if t.startswith("--model_dir=")),
                     str(tmp_path / f"run{number}"))
    bindings = [t.split("=", 1)[1] for t in tokens if t.startswith("--gin_bindings=")]
    for placeholder, value in places.items():
      bindings = [b.replace(f"'{placeholder}'", repr(value)) for b in bindings]
    gin.clear_config()
    try:
      test_gin_configs.train_recipe(files, bindings, pathlib.Path(model_dir), sizes)
    finally:
      gin.clear_config()
