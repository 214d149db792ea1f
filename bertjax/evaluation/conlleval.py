"""Entity-level precision / recall / F1 as CoNLL's `conlleval` script computes them.

A chunk (entity) is a maximal run of tags of one type: it starts at a B- (or S-) tag,
at an I-/E- tag whose type differs from the previous tag's or that follows O/E-/S-,
and ends before the next start or O. So an ill-formed prediction such as `O I-PER`
still yields a PER entity, exactly as conlleval (and seqeval's default mode) read it.
A predicted entity is correct when type, first and last token all match a gold one.
"""
from typing import Iterable, Sequence

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
