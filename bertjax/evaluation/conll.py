"""CoNLL-2003 NER: reading the 4-column files and conlleval's entity-level F1.

A chunk (entity) is a maximal run of tags of one type: it starts at a B- (or S-) tag,
at an I-/E- tag whose type differs from the previous tag's or that follows O/E-/S-,
and ends before the next start or O. So an ill-formed prediction such as `O I-PER`
still yields a PER entity, exactly as conlleval (and seqeval's default mode) read it.
A predicted entity is correct when type, first and last token all match a gold one.
"""
import dataclasses
import os
from typing import Iterable, Sequence

from bertjax import paths
from bertjax.evaluation import readers


# ---------------------------------------------------------------------- reading
LABELS = ("O", "B-PER", "I-PER", "B-ORG", "I-ORG", "B-LOC", "I-LOC", "B-MISC", "I-MISC")
SPLITS = {"train": "train.txt", "dev": "valid.txt", "test": "test.txt"}


@dataclasses.dataclass(frozen=True)
class Sentence:
  words: tuple[str, ...]
  tags: tuple[str, ...]
  source: str  # "file:first line"


def path(split: str, data_dir: str | None = None) -> str:
  if split not in SPLITS:
    raise ValueError(f"Unknown CoNLL-2003 split {split!r}; use one of {sorted(SPLITS)}.")
  return os.path.join(data_dir or paths.data_dir(), "conll2003", SPLITS[split])


def read_sentences(file: str, skip_log: readers.SkipLog,
                   labels: tuple[str, ...] = LABELS) -> list[Sentence]:
  """Sentences of a CoNLL file (`token POS chunk NER` lines, blank line between
  sentences, `-DOCSTART-` lines ignored). A sentence with a malformed line or a tag
  outside `labels` is reported at that line and skipped as a whole."""
  if not os.path.exists(file):
    raise FileNotFoundError(f"No CoNLL file at {file!r}.")
  sentences, words, tags, first_line, bad = [], [], [], 0, False

  def flush():
    if words and not bad:
      sentences.append(Sentence(tuple(words), tuple(tags), f"{file}:{first_line}"))

  with open(file, encoding="utf-8") as f:
    for line_no, line in enumerate(f, start=1):
      fields = line.split()
      if not fields or fields[0] == "-DOCSTART-":
        flush()
        words, tags, bad = [], [], False
        continue
      if not words and not bad:
        first_line = line_no
      if bad:
        continue
      if len(fields) != 4:
        skip_log.skip(file, line_no, f"expected 4 space-separated columns (token POS chunk "
                      f"NER), found {len(fields)}; sentence skipped")
        bad = True
      elif fields[3] not in labels:
        skip_log.skip(file, line_no, f"tag {fields[3]!r} not in the label set {labels}; "
                      f"sentence skipped")
        bad = True
      else:
        words.append(fields[0])
        tags.append(fields[3])
  flush()
  return sentences


# ---------------------------------------------------------------------- scoring
Chunk = tuple[str, int, int]  # (type, first token, last token), inclusive


def _split(tag: str) -> tuple[str, str]:
  if tag == "O" or not tag:
    return "O", ""
  prefix, sep, kind = tag.partition("-")
  if not sep or prefix not in ("B", "I", "E", "S"):
    raise ValueError(f"Tag {tag!r} is neither 'O' nor of the form B-/I-/E-/S-<type>.")
  return prefix, kind


def _ends(prev: str, prev_type: str, tag: str, kind: str) -> bool:
  """Does a chunk end between the previous tag and this one?"""
  if prev in ("E", "S"):
    return True
  if prev in ("B", "I") and tag in ("B", "S", "O"):
    return True
  return prev != "O" and prev_type != kind


def _starts(prev: str, prev_type: str, tag: str, kind: str) -> bool:
  """Does a chunk start at this tag?"""
  if tag in ("B", "S"):
    return True
  if prev in ("E", "S", "O") and tag in ("I", "E"):
    return True
  return tag != "O" and prev_type != kind


def chunks(tags: Sequence[str]) -> list[Chunk]:
  """Entities of one sentence's tag sequence."""
  found, start, current = [], None, ""
  prev, prev_type = "O", ""
  for i, tag in enumerate(list(tags) + ["O"]):  # the sentinel O closes a final chunk
    prefix, kind = _split(tag)
    if start is not None and _ends(prev, prev_type, prefix, kind):
      found.append((current, start, i - 1))
      start = None
    if prefix != "O" and _starts(prev, prev_type, prefix, kind):
      start, current = i, kind
    prev, prev_type = prefix, kind
  return found


def entity_scores(gold: Iterable[Sequence[str]],
                  predicted: Iterable[Sequence[str]]) -> dict[str, object]:
  """Micro precision / recall / F1 over all sentences (fractions), plus per type.

  Returns {'precision', 'recall', 'f1', 'per_type': {type: {precision, recall, f1,
  support}}}.
  """
  gold_set, pred_set = set(), set()
  for n, (g, p) in enumerate(zip(gold, predicted, strict=True)):
    if len(g) != len(p):
      raise ValueError(f"Sentence {n}: {len(g)} gold tags but {len(p)} predicted tags.")
    gold_set.update((n,) + c for c in chunks(g))
    pred_set.update((n,) + c for c in chunks(p))
  result = _prf(len(gold_set & pred_set), len(pred_set), len(gold_set))
  types = sorted({c[1] for c in gold_set | pred_set})
  result["per_type"] = {}
  for kind in types:
    g = {c for c in gold_set if c[1] == kind}
    p = {c for c in pred_set if c[1] == kind}
    result["per_type"][kind] = dict(_prf(len(g & p), len(p), len(g)), support=len(g))
  return result


def _prf(correct: int, predicted: int, actual: int) -> dict[str, float]:
  precision = correct / predicted if predicted else 0.0
  recall = correct / actual if actual else 0.0
  f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
  return {"precision": precision, "recall": recall, "f1": f1}
