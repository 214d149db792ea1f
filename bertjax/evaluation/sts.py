"""Unsupervised semantic-textual-similarity evaluation (SBERT paper, Table 1 protocol).

Every pair is embedded independently, scored by cosine similarity, and the score is
Spearman's rank correlation with the gold similarity, x 100. Readers cover the STS
benchmark (STS-B), SICK-R and the SemEval STS 2012-2016 test sets in their public
file formats. (Fine-tuning a cross-encoder on GLUE STS-B lives in bertjax/finetune/.)
"""
import csv
import dataclasses
import logging
import math
import os
import pathlib
from typing import Callable, Sequence

import numpy as np

from bertjax import paths
from bertjax.evaluation.metrics import spearman

EmbedFn = Callable[[Sequence[str]], np.ndarray]


@dataclasses.dataclass(frozen=True)
class StsPairs:
  """Aligned sentence pairs and gold similarity scores of one evaluation set."""
  name: str
  sentences1: list[str]
  sentences2: list[str]
  scores: np.ndarray
  skipped: int = 0  # rows of the file left out for a bad score

  def __post_init__(self):
    if not len(self.sentences1) == len(self.sentences2) == len(self.scores):
      raise ValueError(f"{self.name}: {len(self.sentences1)} first sentences, "
                       f"{len(self.sentences2)} second sentences and {len(self.scores)} scores; "
                       "every pair needs both sentences and a score.")

  def __len__(self) -> int:
    return len(self.scores)


def _require(path: pathlib.Path) -> pathlib.Path:
  if not path.exists():
    raise FileNotFoundError(f"{path} not found. Point $BERTJAX_DATA_DIR (or --data_dir) at the "
                            "folder holding stsbenchmark/, sick/ and STS/ (see data/README.md).")
  return path


def _tsv_rows(path: pathlib.Path) -> list[tuple[int, list[str]]]:
  """(line number, fields) of every non-empty row."""
  with open(_require(path), encoding="utf-8", newline="") as f:
    # QUOTE_NONE: STS sentences contain unbalanced quote characters.
    return [(line, row) for line, row in enumerate(
        csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE), 1) if row]


def _scored(name: str, path: pathlib.Path, rows: Sequence[tuple[int, str, str, str]],
            low: float, high: float) -> "StsPairs":
  """StsPairs of (line, sentence1, sentence2, score text) rows; a row whose score is not a
  finite number from `low` to `high` is left out and reported (file:line, and how many)."""
  kept, bad = [], []
  for line, a, b, raw in rows:
    try:
      score = float(raw)
    except ValueError:
      score = math.nan
    if low <= score <= high:  # (NaN compares false)
      kept.append((a, b, score))
    else:
      bad.append(f"{path}:{line} ({raw!r})")
  if bad:
    logging.warning("%s: left out %d row(s) whose score is not a number from %g to %g: %s%s",
                    name, len(bad), low, high, ", ".join(bad[:5]), " ..." if len(bad) > 5 else "")
  if not kept:
    raise ValueError(f"{path}: no row has a score from {low:g} to {high:g}; first bad: {bad[0]}.")
  return StsPairs(name, [k[0] for k in kept], [k[1] for k in kept],
                  np.array([k[2] for k in kept]), skipped=len(bad))


def read_stsbenchmark(split: str = "test", data_dir: str | os.PathLike | None = None) -> StsPairs:
  """STS benchmark `sts-{train,dev,test}.csv`: genre, file, year, id, score, s1, s2[, source...].

  Scores are 0..5. Some rows carry extra trailing source columns; they are ignored.
  """
  if split not in ("train", "dev", "test"):
    raise ValueError(f"Unknown STS-B split {split!r}; expected train, dev or test.")
  root = pathlib.Path(data_dir or paths.data_dir()) / "stsbenchmark"
  path = root / f"sts-{split}.csv"
  rows = _tsv_rows(path)
  bad = [line for line, row in rows if len(row) < 7]
  if bad:
    raise ValueError(f"{path}: lines {bad[:5]} have fewer than the 7 "
                     "tab-separated fields genre, file, year, id, score, sentence1, sentence2.")
  return _scored(f"STSb-{split}", path, [(line, r[5], r[6], r[4]) for line, r in rows], 0, 5)


_SICK_FILES = {"train": "SICK_train.txt", "trial": "SICK_trial.txt",
               "test": "SICK_test_annotated.txt"}


def read_sick(split: str = "test", data_dir: str | os.PathLike | None = None) -> StsPairs:
  """SICK relatedness (SICK-R): header pair_ID, sentence_A, sentence_B, relatedness_score, ..."""
  if split not in _SICK_FILES:
    raise ValueError(f"Unknown SICK split {split!r}; expected one of {sorted(_SICK_FILES)}.")
  path = pathlib.Path(data_dir or paths.data_dir()) / "sick" / _SICK_FILES[split]
  (_, header), *rows = _tsv_rows(path)
  try:
    a, b, score = (header.index(c) for c in ("sentence_A", "sentence_B", "relatedness_score"))
  except ValueError:
    raise ValueError(f"{path}: header {header} lacks sentence_A / sentence_B / "
                     "relatedness_score.") from None
  # SICK's relatedness runs from 1 to 5.
  return _scored(f"SICK-R-{split}", path, [(line, r[a], r[b], r[score]) for line, r in rows], 1, 5)


# SemEval STS test sets as SentEval ships them: STS/STS1X-en-test/STS.input.<set>.txt
# (sentence1 TAB sentence2) with STS.gs.<set>.txt (one gold score per line; an empty line
# means the pair was not scored and is dropped).
STS_YEARS = {
    12: ("MSRpar", "MSRvid", "SMTeuroparl", "surprise.OnWN", "surprise.SMTnews"),
    13: ("FNWN", "headlines", "OnWN"),
    14: ("deft-forum", "deft-news", "headlines", "images", "OnWN", "tweet-news"),
    15: ("answers-forums", "answers-students", "belief", "headlines", "images"),
    16: ("answer-answer", "headlines", "plagiarism", "postediting", "question-question"),
}


def read_sts_year(year: int, data_dir: str | os.PathLike | None = None) -> list[StsPairs]:
  """All sub-sets of SemEval STS 20`year` (12..16), one StsPairs each."""
  if year not in STS_YEARS:
    raise ValueError(f"Unknown STS year {year}; expected one of {sorted(STS_YEARS)}.")
  root = pathlib.Path(data_dir or paths.data_dir()) / "STS" / f"STS{year}-en-test"
  subsets = []
  for name in STS_YEARS[year]:
    with open(_require(root / f"STS.input.{name}.txt"), encoding="utf-8") as f:
      pairs = [line.rstrip("\n").split("\t") for line in f]
    with open(_require(root / f"STS.gs.{name}.txt"), encoding="utf-8") as f:
      gold = [line.strip() for line in f]
    if len(pairs) != len(gold):
      raise ValueError(f"{root}: {len(pairs)} input pairs but {len(gold)} gold lines for {name}.")
    scored = [(line, p[0], p[1], g) for line, (p, g) in enumerate(zip(pairs, gold), 1) if g]
    subsets.append(_scored(f"STS{year}-{name}", root / f"STS.gs.{name}.txt", scored, 0, 5))
  return subsets


def cosine_scores(embeddings1: np.ndarray, embeddings2: np.ndarray) -> np.ndarray:
  """Row-wise cosine similarity, in float64."""
  a, b = np.asarray(embeddings1, np.float64), np.asarray(embeddings2, np.float64)
  norms = np.maximum(np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1), 1e-12)
  return (a * b).sum(1) / norms


def evaluate_pairs(embed: EmbedFn, pairs: StsPairs) -> float:
  """Spearman(cos(u, v), gold) x 100. Each distinct sentence is embedded once."""
  unique = sorted(set(pairs.sentences1) | set(pairs.sentences2))
  index = {s: i for i, s in enumerate(unique)}
  vectors = np.asarray(embed(unique))
  u = vectors[[index[s] for s in pairs.sentences1]]
  v = vectors[[index[s] for s in pairs.sentences2]]
  return 100.0 * spearman(cosine_scores(u, v), pairs.scores)


def evaluate_year(embed: EmbedFn, year: int, data_dir=None) -> float:
  """STS12-16 as in the SBERT paper: Spearman over all of the year's pairs concatenated.

  (SentEval's 'all' figure; the per-subset mean is easy to get from evaluate_pairs.)
  """
  subsets = read_sts_year(year, data_dir)
  merged = StsPairs(f"STS{year}", sum((s.sentences1 for s in subsets), []),
                    sum((s.sentences2 for s in subsets), []),
                    np.concatenate([s.scores for s in subsets]))
  return evaluate_pairs(embed, merged)


def evaluate_all(embed: EmbedFn, data_dir=None) -> dict[str, float]:
  """Every STS set present under data_dir: STSb test, SICK-R test, STS12-16."""
  root = pathlib.Path(data_dir or paths.data_dir())
  results = {}
  for year in STS_YEARS:
    if (root / "STS" / f"STS{year}-en-test").exists():
      results[f"STS{year}"] = evaluate_year(embed, year, root)
  if (root / "stsbenchmark").exists():
    results["STSb"] = evaluate_pairs(embed, read_stsbenchmark("test", root))
  if (root / "sick").exists():
    results["SICK-R"] = evaluate_pairs(embed, read_sick("test", root))
  return results
