"""SQuAD v1.1 / v2.0: reading the official JSON files and the official scoring.

Reading: every question of a file, in file order, with all its gold answer texts and
the character spans of those that match the context (`read_examples`).

Scoring follows the official evaluation scripts' logic:
* Answers are compared after normalisation: lower case, punctuation removed, the
  articles a/an/the removed, whitespace collapsed.
* EM is 1 when the normalised prediction equals any normalised gold answer; F1 is the
  bag-of-tokens overlap F1, maximised over the gold answers.
* v2.0: a question without answers has the single gold answer "" and scores 1 only
  for an empty prediction. Given a no-answer probability (or any score where larger
  means "more likely unanswerable") per question, a prediction is replaced by "" when
  that score exceeds a threshold; `best_threshold` finds the threshold that maximises
  EM or F1 on a dev set (the official script's `best_f1_thresh`).

Windows, features and span post-processing for a model: bertjax.finetune.squad.
"""
import collections
import dataclasses
import json
import os
import re
import string
from typing import Mapping, Sequence

from bertjax import paths
from bertjax.evaluation import readers


# ---------------------------------------------------------------------- reading
@dataclasses.dataclass(frozen=True)
class SquadExample:
  qid: str
  question: str
  context: str
  answer_texts: tuple[str, ...]            # all gold texts (scoring)
  answer_spans: tuple[tuple[int, int], ...]  # aligned [start, end) char spans (training)
  is_impossible: bool
  article: int


def default_path() -> str:
  return os.path.join(paths.data_dir(), "squad", "dev-v1.1.json")


def read_examples(path: str, skip_log: readers.SkipLog) -> list[SquadExample]:
  """All questions of a SQuAD v1.1 / v2.0 JSON file, in file order.

  An answer whose `answer_start` does not point at its text in the context is
  reported (file, line, question id) and dropped from the training spans; its text
  still counts as a gold answer for scoring, exactly as in the official evaluation.
  """
  if not os.path.exists(path):
    raise FileNotFoundError(f"No SQuAD file at {path!r}.")
  with open(path, encoding="utf-8") as f:
    raw = f.read()
  try:
    data = json.loads(raw)["data"]
  except (json.JSONDecodeError, KeyError) as e:
    raise ValueError(f"{path} is not a SQuAD JSON file (a top-level 'data' list): {e}") from e
  examples = []
  for article_index, article in enumerate(data):
    for paragraph in article["paragraphs"]:
      context = paragraph["context"]
      for qa in paragraph["qas"]:
        texts, spans = [], []
        for answer in qa.get("answers", []):
          text, start = answer.get("text"), answer.get("answer_start")
          if not isinstance(text, str) or not isinstance(start, int) or isinstance(start, bool):
            skip_log.skip(path, _line_of(raw, qa["id"]),
                          f"question {qa['id']}: answer needs a string 'text' and an integer "
                          f"'answer_start'; got {text!r} and {start!r}")
            continue
          texts.append(text)
          if context[start:start + len(text)] == text:
            spans.append((start, start + len(text)))
          else:
            skip_log.skip(path, _line_of(raw, qa["id"]),
                          f"question {qa['id']}: answer {text!r} does not match the context "
                          f"at answer_start={start} ({context[start:start + len(text)]!r})")
        examples.append(SquadExample(qa["id"], qa["question"], context, tuple(texts),
                                     tuple(spans), bool(qa.get("is_impossible", False)),
                                     article_index))
  return examples


def _line_of(raw: str, qid: str) -> int:
  """1-based line of a question id in the raw JSON (for error messages)."""
  position = raw.find(f'"{qid}"')
  return raw.count("\n", 0, max(position, 0)) + 1


def split_by_article(examples: list[SquadExample],
                     num_train_articles: int) -> tuple[list[SquadExample], list[SquadExample]]:
  """(questions of the first N articles, questions of the rest): article-disjoint."""
  train = [e for e in examples if e.article < num_train_articles]
  held_out = [e for e in examples if e.article >= num_train_articles]
  return train, held_out


# ---------------------------------------------------------------------- scoring
_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)
_PUNCTUATION = frozenset(string.punctuation)


def normalize_answer(text: str) -> str:
  text = "".join(ch for ch in text.lower() if ch not in _PUNCTUATION)
  text = _ARTICLES.sub(" ", text)
  return " ".join(text.split())


def exact_match(prediction: str, gold: str) -> float:
  return float(normalize_answer(prediction) == normalize_answer(gold))


def f1(prediction: str, gold: str, version: str = "2.0") -> float:
  pred_tokens = normalize_answer(prediction).split()
  gold_tokens = normalize_answer(gold).split()
  if version == "2.0" and (not pred_tokens or not gold_tokens):
    # v2.0 rule: an empty answer scores 1 against an empty gold and 0 otherwise.
    # (v1.1 has no such rule: there an empty side simply has no overlap.)
    return float(pred_tokens == gold_tokens)
  common = collections.Counter(pred_tokens) & collections.Counter(gold_tokens)
  overlap = sum(common.values())
  if overlap == 0:
    return 0.0
  precision, recall = overlap / len(pred_tokens), overlap / len(gold_tokens)
  return 2 * precision * recall / (precision + recall)


def gold_answers(answer_texts: Sequence[str], version: str = "2.0") -> list[str]:
  """The gold set scored against. v2.0: answers that normalise to something, else [""]."""
  if version == "1.1":
    return list(answer_texts)
  kept = [a for a in answer_texts if normalize_answer(a)]
  return kept or [""]


def raw_scores(golds: Mapping[str, Sequence[str]], predictions: Mapping[str, str],
               version: str = "2.0") -> tuple[dict[str, float], dict[str, float]]:
  """Per-question EM and F1 (maximised over gold answers), for questions with a prediction.

  A question with no prediction is skipped here (the official scripts print "Missing
  prediction"); `evaluate` decides how it counts.
  """
  if version not in ("1.1", "2.0"):
    raise ValueError(f"SQuAD version must be '1.1' or '2.0', got {version!r}.")
  em, f1_scores = {}, {}
  for qid, answers in golds.items():
    if qid not in predictions:
      continue
    gold = gold_answers(answers, version)
    em[qid] = max(exact_match(predictions[qid], g) for g in gold)
    f1_scores[qid] = max(f1(predictions[qid], g, version) for g in gold)
  return em, f1_scores


def apply_no_answer_threshold(scores: Mapping[str, float], na_scores: Mapping[str, float],
                              has_answer: Mapping[str, bool], threshold: float) -> dict[str, float]:
  """Scores after answering "" wherever na_scores[qid] > threshold."""
  return {qid: (float(not has_answer[qid]) if na_scores[qid] > threshold else s)
          for qid, s in scores.items()}


def best_threshold(scores: Mapping[str, float], na_scores: Mapping[str, float],
                   predictions: Mapping[str, str],
                   has_answer: Mapping[str, bool]) -> tuple[float, float]:
  """(best score in %, threshold) over thresholds na_scores can take.

  Start from the threshold below every na_score (everything answered ""), whose score
  is the number of unanswerable questions; then, in increasing na_score order, let
  one more question keep its prediction and track the running total. Ties go to the
  lowest threshold, as in the official script.
  """
  total = sum(1 for qid in scores if not has_answer[qid])
  best, best_thresh = total, 0.0
  for qid in sorted(scores, key=lambda q: na_scores[q]):
    if has_answer[qid]:
      total += scores[qid]
    elif predictions[qid]:
      total -= 1  # it was right to abstain; answering makes it wrong
    if total > best:
      best, best_thresh = total, na_scores[qid]
  return 100.0 * best / max(len(scores), 1), best_thresh


def evaluate(golds: Mapping[str, Sequence[str]], predictions: Mapping[str, str],
             version: str = "1.1", na_scores: Mapping[str, float] | None = None,
             threshold: float = 1.0) -> dict[str, float]:
  """Official-style report: `exact` and `f1` in %.

  v1.1: over every question in `golds`; a missing prediction scores 0.
  v2.0: over the questions with a prediction (as the official v2.0 script). With
  `na_scores`, predictions are first blanked where the score exceeds `threshold`
  (default 1.0, the official --na-prob-thresh); the report adds HasAns / NoAns
  breakdowns and `best_exact` / `best_f1` with their thresholds.
  """
  em, f1_scores = raw_scores(golds, predictions, version)
  if version == "1.1":
    n = max(len(golds), 1)
    return {"exact": 100.0 * sum(em.values()) / n, "f1": 100.0 * sum(f1_scores.values()) / n,
            "total": len(golds)}
  has_answer = {qid: bool(gold_answers(golds[qid])[0]) for qid in em}
  na_scores = {qid: (na_scores or {}).get(qid, 0.0) for qid in em}
  em_t = apply_no_answer_threshold(em, na_scores, has_answer, threshold)
  f1_t = apply_no_answer_threshold(f1_scores, na_scores, has_answer, threshold)
  report = {"exact": 100.0 * _mean(em_t.values()), "f1": 100.0 * _mean(f1_t.values()),
            "total": len(em)}
  for name, keep in (("HasAns", True), ("NoAns", False)):
    qids = [q for q in em if has_answer[q] == keep]
    if qids:
      report[f"{name}_exact"] = 100.0 * _mean(em_t[q] for q in qids)
      report[f"{name}_f1"] = 100.0 * _mean(f1_t[q] for q in qids)
      report[f"{name}_total"] = len(qids)
  preds = {qid: predictions[qid] for qid in em}
  report["best_exact"], report["best_exact_thresh"] = best_threshold(em, na_scores, preds,
                                                                     has_answer)
  report["best_f1"], report["best_f1_thresh"] = best_threshold(f1_scores, na_scores, preds,
                                                               has_answer)
  return report


def _mean(values) -> float:
  values = list(values)
  return sum(values) / len(values) if values else 0.0
