"""CoNLL-2003 NER: reading the 4-column files and conlleval's entity-level F1.

Scores come from seqeval, whose default mode reads entities exactly as CoNLL's
`conlleval` script does: a chunk (entity) is a maximal run of tags of one type; it
starts at a B- (or S-) tag, or at an I-/E- tag whose type differs from the previous
tag's or that follows O/E-/S-, and ends before the next start or O. So an ill-formed
prediction such as `O I-PER` still yields a PER entity. A predicted entity is correct
when type, first and last token all match a gold one; precision, recall and F1 are
micro-averaged over all entities of all sentences.
"""
import dataclasses
import os
import re
from typing import Iterable, Sequence

from seqeval.metrics import sequence_labeling

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
                   labels: tuple[str, ...] | None = LABELS,
                   columns: int | None = 4) -> list[Sentence]:
  """Sentences of a CoNLL file (`token POS chunk NER` lines, blank line between
  sentences, `-DOCSTART-` lines ignored). A sentence with a malformed line or a tag
  outside `labels` is reported at that line and skipped as a whole. `columns=None` reads
  any file of token-per-line columns, the token first and its tag last; `labels=None`
  takes every tag."""
  if not os.path.exists(file):
    raise FileNotFoundError(f"No CoNLL file at {file!r}.")
  sentences, words, tags, first_line, bad = [], [], [], 0, False

  def flush():
    if words and not bad:
      sentences.append(Sentence(tuple(words), tuple(tags), f"{file}:{first_line}"))

  with open(file, encoding="utf-8-sig") as f:
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
      if columns is not None and len(fields) != columns:
        skip_log.skip(file, line_no, f"expected {columns} space-separated columns (token POS "
                      f"chunk NER), found {len(fields)}; sentence skipped")
        bad = True
      elif len(fields) < 2:
        skip_log.skip(file, line_no, f"a line needs the token and its tag (found "
                      f"{line.strip()!r}); sentence skipped. Put the tag in the last column")
        bad = True
      elif labels is not None and fields[-1] not in labels:
        skip_log.skip(file, line_no, f"tag {fields[-1]!r} not in the label set {labels}; "
                      f"sentence skipped")
        bad = True
      else:
        words.append(fields[0])
        tags.append(fields[-1])
  flush()
  readers.require_rows(file, len(sentences), skip_log, "sentences")
  return sentences


# ---------------------------------------------------------------------- scoring
Chunk = tuple[str, int, int]  # (type, first token, last token), inclusive
_TAG = re.compile(r"O|[BIES]-\S+")


def is_tag(tag) -> bool:
  """Is `tag` an entity tag that scoring reads: 'O' or B-/I-/E-/S-<type>?"""
  return isinstance(tag, str) and bool(_TAG.fullmatch(tag))


def _checked(tags: Sequence[str]) -> list[str]:
  """The tags as a list; seqeval only warns on a malformed tag, so it is rejected here."""
  for tag in tags:
    if not is_tag(tag):
      raise ValueError(f"Tag {tag!r} is neither 'O' nor of the form B-/I-/E-/S-<type>.")
  return list(tags)


def chunks(tags: Sequence[str]) -> list[Chunk]:
  """Entities of one sentence's tag sequence."""
  return sequence_labeling.get_entities(_checked(tags))


def entity_scores(gold: Iterable[Sequence[str]],
                  predicted: Iterable[Sequence[str]]) -> dict[str, object]:
  """Micro precision / recall / F1 over all sentences (fractions), plus per type.

  Returns {'precision', 'recall', 'f1', 'per_type': {type: {precision, recall, f1,
  support}}}. A score whose denominator is 0 (no entity predicted, or none in gold)
  is 0, as in conlleval.
  """
  gold, predicted = list(gold), list(predicted)
  if len(gold) != len(predicted):
    raise ValueError(f"{len(gold)} gold sentences but {len(predicted)} predicted sentences.")
  for n, (g, p) in enumerate(zip(gold, predicted)):
    if len(g) != len(p):
      raise ValueError(f"Sentence {n}: {len(g)} gold tags but {len(p)} predicted tags.")
  gold, predicted = [_checked(g) for g in gold], [_checked(p) for p in predicted]

  def scores(average):
    return sequence_labeling.precision_recall_fscore_support(gold, predicted, average=average,
                                                             zero_division=0)

  result = dict(zip(("precision", "recall", "f1"), map(float, scores("micro")[:3])))
  # seqeval lists the per-type scores in the sorted order of every type seen.
  types = sorted({kind for kind, _, _ in sequence_labeling.get_entities(gold + predicted)})
  result["per_type"] = {
      kind: {"precision": float(p), "recall": float(r), "f1": float(f), "support": int(s)}
      for kind, p, r, f, s in zip(types, *scores(None))}
  return result
