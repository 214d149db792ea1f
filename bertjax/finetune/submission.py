"""Predictions in each benchmark's submission format.

* GLUE: the server's TSVs (`index<TAB>prediction`, with the task's label strings or
  STS-B scores), named as the server expects (SST-2.tsv, MNLI-m.tsv, ...).
* SQuAD: `predictions.json` ({question id: answer text}, "" = no answer) and, for 2.0,
  `null_odds.json` ({question id: s_null - s_best}), the official script's inputs.
* CoNLL-2003: conlleval's input, `word gold predicted` per line, a blank line after
  each sentence.
* SWAG: a CSV with one `pred` column (the chosen ending), one row per example in
  file order, as the leaderboard reads it.
"""
import csv
import json
import os
from typing import Mapping, Sequence

from bertjax.evaluation import conll


def write_glue(path: str, indices: Sequence[str], predictions: Sequence[str]) -> str:
  if len(indices) != len(predictions):
    raise ValueError(f"{len(indices)} indices but {len(predictions)} predictions.")
  os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
  with open(path, "w", encoding="utf-8") as f:
    f.write("index\tprediction\n")
    f.writelines(f"{i}\t{p}\n" for i, p in zip(indices, predictions))
  return path


def read_glue(path: str) -> dict[str, str]:
  """{index: prediction} of a GLUE submission file (for checks and comparisons)."""
  with open(path, encoding="utf-8") as f:
    header = f.readline().rstrip("\n")
    if header != "index\tprediction":
      raise ValueError(f"{path}: header {header!r} is not 'index<TAB>prediction'.")
    return dict(line.rstrip("\n").split("\t") for line in f if line.strip())


def write_squad(directory: str, answers: Mapping[str, str],
                null_odds: Mapping[str, float] | None = None) -> list[str]:
  os.makedirs(directory, exist_ok=True)
  written = [os.path.join(directory, "predictions.json")]
  with open(written[0], "w", encoding="utf-8") as f:
    json.dump(dict(answers), f, ensure_ascii=False, indent=1)
  if null_odds is not None:
    written.append(os.path.join(directory, "null_odds.json"))
    with open(written[1], "w", encoding="utf-8") as f:
      json.dump({k: float(v) for k, v in null_odds.items()}, f, indent=1)
  return written


def write_conll(path: str, sentences: Sequence[conll.Sentence],
                predicted: Sequence[Sequence[str]]) -> str:
  if len(sentences) != len(predicted):
    raise ValueError(f"{len(sentences)} sentences but {len(predicted)} predictions.")
  os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
  with open(path, "w", encoding="utf-8") as f:
    for sentence, tags in zip(sentences, predicted):
      if len(tags) != len(sentence.words):
        raise ValueError(f"{sentence.source}: {len(sentence.words)} words but {len(tags)} tags.")
      f.writelines(f"{w} {g} {p}\n" for w, g, p in zip(sentence.words, sentence.tags, tags))
      f.write("\n")
  return path


def write_swag(path: str, predictions: Sequence[int]) -> str:
  os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
  with open(path, "w", encoding="utf-8", newline="") as f:
    writer = csv.writer(f)
    writer.writerow(["pred"])
    writer.writerows([int(p)] for p in predictions)
  return path
