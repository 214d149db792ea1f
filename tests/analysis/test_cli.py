"""`python -m bertjax.analysis attention|heads|probe`: docs/analyze.md's commands, run on tiny
random BERTs and the real GLUE / CoNLL-2003 files; the probes on features with a known
answer; bad arguments named."""
import json
import pathlib
import shlex

import numpy as np
import pytest

from bertjax.analysis import __main__ as cli, probing
from tests.helpers import docs, sbert as sbert_helpers

TINY = {"attention": ["--max_seq_length=32", "--max_examples=8"],
        "heads": ["--max_seq_length=32", "--max_eval_examples=16", "--importance_examples=16",
                  "--step=0.5", "--max_fraction=0.5"],
        "probe": ["--max_seq_length=32", "--train_sentences=24", "--dev_sentences=12",
                  "--steps=20", "--tasks=pos,ner_spans"]}


def readme_commands() -> list[str]:
  lines = docs.text().splitlines()
  return [line.strip() for line in lines if line.strip().startswith("python -m bertjax.analysis")]


def tiny_classifier(directory: pathlib.Path) -> pathlib.Path:
  """A 2-layer, 4-head BertForSequenceClassification (2 labels) with the tiny vocabulary."""
  import torch
  import transformers
  torch.manual_seed(0)
  config = transformers.BertConfig(vocab_size=len(sbert_helpers.VOCAB), hidden_size=32,
                                   num_hidden_layers=2, num_attention_heads=4,
                                   intermediate_size=64, max_position_embeddings=64)
  transformers.BertForSequenceClassification(config).save_pretrained(directory)
  (directory / "vocab.txt").write_text("\n".join(sbert_helpers.VOCAB) + "\n")
  (directory / "tokenizer_config.json").write_text('{"do_lower_case": true}')
  return directory


@pytest.fixture(scope="module")
def places(tmp_path_factory):
  root = tmp_path_factory.mktemp("analysis")
  (root / "sentences.txt").write_text("a man is playing the guitar .\n"
                                      "the dog runs on grass , very long\ta cat\n")
  return {"MODEL": str(sbert_helpers.write_tiny_bert(root / "bert")),
          "FINETUNED": str(tiny_classifier(root / "classifier")),
          "sentences.txt": str(root / "sentences.txt"), "OUT": str(root / "out")}


def run(command: str, places: dict, capsys) -> tuple[list[str], dict]:
  argv = []
  for token in shlex.split(command)[3:]:
    flag, _, value = token.partition("=")
    argv.append(f"{flag}={places.get(value, value)}" if value else token)
  argv = [a.replace("=OUT", "=" + places["OUT"]) for a in argv]
  assert cli.main(argv + TINY[argv[0]]) == 0
  return argv, json.loads(capsys.readouterr().out.strip().splitlines()[-1])


def test_readme_commands_write_their_results(places, capsys):
  commands = readme_commands()
  assert [shlex.split(c)[3] for c in commands] == ["attention", "heads", "probe"]
  for command in commands:
    argv, summary = run(command, places, capsys)
    out = pathlib.Path(next(a for a in argv if a.startswith("--out=")).split("=", 1)[1])
    if argv[0] == "attention":
      assert summary["examples"] == 2
      assert {"head_statistics.md", "head_statistics.png", "head_view.html"} <= {
          p.name for p in out.iterdir()}
      assert len(list((out / "heatmaps").glob("*.png"))) == 2
    elif argv[0] == "heads":
      curve = json.loads((out / "pruning_curve.json").read_text())["curve"]
      assert [row["heads_pruned"] for row in curve] == [0, 4]
      assert (out / "pruning_curve.png").exists()
    else:
      tasks = json.loads((out / "probe_by_layer.json").read_text())["tasks"]
      assert set(tasks) == {"pos", "ner_spans"}
      assert len(tasks["pos"]["accuracy_by_layer"]) == 3  # embeddings + 2 layers


def test_bad_arguments_are_named(places, capsys):
  assert cli.main(["probe", f"--model={places['MODEL']}", "--out=/tmp/unused",
                   "--tasks=pos,sentiment"]) == 1
  assert "tasks: ['sentiment'] unknown" in capsys.readouterr().err
  assert cli.main(["heads", f"--model={places['FINETUNED']}", "--out=/tmp/unused",
                   "--task=stsb"]) == 1
  assert "regression" in capsys.readouterr().err


def test_probes_find_the_layer_that_encodes_the_labels():
  """Layer 1 holds the label linearly, layer 0 noise: the per-layer probe and the scalar mix
  both say so."""
  rng = np.random.default_rng(0)
  def data(n):
    labels = rng.integers(0, 3, n)
    x = rng.normal(size=(n, 2, 8))
    x[:, 1, :3] += 3 * np.eye(3)[labels]
    return x.astype(np.float32), labels
  (x, y), (dev_x, dev_y) = data(300), data(100)
  by_layer = probing.layer_probes(x, y, dev_x, dev_y, 3, steps=100)
  assert by_layer[1] > 0.9 and by_layer[0] < 0.6, by_layer
  accuracy, weights = probing.mix_probe(x, y, dev_x, dev_y, 3, steps=100)
  assert accuracy > 0.9 and weights[1] > weights[0], (accuracy, weights)


def test_conll_columns_and_spans(tmp_path):
  path = tmp_path / "mini.txt"
  path.write_text("-DOCSTART- -X- -X- O\n\nEU NNP B-NP B-ORG\nrejects VBZ B-VP O\n"
                  "German JJ B-NP B-MISC\ncall NN I-NP O\n\nPeter NNP B-NP B-PER\n")
  sentences = probing.read_columns(str(path))
  assert [s.words for s in sentences] == [("EU", "rejects", "German", "call"), ("Peter",)]
  index = np.array([[0, 1, 2, 3], [4, -1, -1, -1]])
  rows, labels, names = probing.word_targets(sentences, "pos", index)
  assert names == ["JJ", "NN", "NNP", "VBZ"] and labels.tolist() == [2, 3, 0, 1, 2]
  first, last, labels, names = probing.span_targets(sentences, "chunk_spans", index)
  assert (first.tolist(), last.tolist(), names) == ([0, 1, 2, 4], [0, 1, 3, 4], ["NP", "VP"])
  with pytest.raises(ValueError, match="not a span task"):
    probing.span_targets(sentences, "pos", index)
