"""Reading your own files of tagged tokens and of questions, for `bertjax.fine_tune`.

Tagged tokens (`token_classification`), either

  .jsonl   one object per sentence: {"tokens": ["John", "lives", ...], "tags": ["B-PER", "O", ...]}
  other    CoNLL-style columns (.conll, .txt, .tsv, ...): one token per line, its first column
           the token and its last the tag, a blank line between sentences, -DOCSTART- ignored

Tags are entity tags (O, B-/I-/E-/S-<type>: IOB2, IOB1 or IOBES), scored at entity level as
CoNLL-2003 is (`bertjax.evaluation.conll`). Questions (`question_answering`): a .jsonl (or
.csv / .tsv) row per question with its "question" and "context", and its answer either as
SQuAD's and the `datasets` library's {"answers": {"text": [...], "answer_start": [...]}} (empty
lists: the context does not answer) or as two fields, "answer" and "answer_start" ("" : no
answer); `answer_start` counts characters of the context from 0. An optional "id" names the
question in the predictions (default: its line).

A row that cannot be used is reported with its file and line and skipped (the run's report
counts them); a file none of whose rows can be used is an error saying why.
"""
import json

from bertjax.evaluation import conll, readers
from bertjax.evaluation.squad import SquadExample

TAG_FORM = "entity tags: O, or B-/I-/E-/S- and a type, as B-PER (CoNLL-2003's)"


def read_sentences(path: str, tokens: str, tags: str, skips: readers.SkipLog,
                   labels: tuple[str, ...] | None = None,
                   limit: int | None = None) -> list[conll.Sentence]:
  """The tagged sentences of a .jsonl (fields `tokens` and `tags`) or CoNLL-style file;
  given `labels`, a sentence with another tag is skipped."""
  rows = (_json_sentences(path, tokens, tags, skips) if path.lower().endswith(".jsonl")
          else ((int(s.source.rsplit(":", 1)[1]), s.words, s.tags)
                for s in conll.read_sentences(path, skips, labels=None, columns=None)))
  sentences = []
  for line, words, sentence_tags in rows:
    bad = [t for t in sentence_tags if not conll.is_tag(t)]
    unknown = [t for t in sentence_tags if labels is not None and t not in labels]
    if bad:
      skips.skip(path, line, f"tag {bad[0]!r} is not one of the {TAG_FORM}")
    elif unknown:
      skips.skip(path, line, f"tag {unknown[0]!r} is not one of the model's tags {labels}")
    else:
      sentences.append(conll.Sentence(tuple(words), tuple(sentence_tags), f"{path}:{line}"))
      if limit and len(sentences) >= limit:
        break
  readers.require_rows(path, len(sentences), skips, "sentences")
  return sentences


def _json_sentences(path: str, tokens: str, tags: str, skips: readers.SkipLog):
  """(line, words, tags) of each usable object of a .jsonl file."""
  for line, row in readers.read_records(path, skips):
    words, word_tags = row.get(tokens), row.get(tags)
    if not _strings(words) or not _strings(word_tags):
      skips.skip(path, line, f"needs lists of strings {tokens!r} and {tags!r} (its fields: "
                 f"{', '.join(map(str, row))})")
    elif len(words) != len(word_tags) or not words:
      skips.skip(path, line, f"{len(words)} {tokens} but {len(word_tags)} {tags}: give one "
                 "tag per token")
    else:
      yield line, words, word_tags


def _strings(value) -> bool:
  return isinstance(value, list) and all(isinstance(v, str) for v in value)


def read_questions(path: str, question: str, context: str, answers: str,
                   skips: readers.SkipLog, limit: int | None = None) -> list[SquadExample]:
  """The questions of a .jsonl / .csv / .tsv file (field names as given; `answers` a
  SQuAD-style {"text": [...], "answer_start": [...]}, or an answer text with its start in
  the field `<answers>_start`)."""
  examples, ids = [], set()
  for line, row in readers.read_records(path, skips):
    missing = [f for f in (question, context) if not isinstance(row.get(f), str) or
               not row[f].strip()]
    if missing:
      skips.skip(path, line, f"no text {', '.join(map(repr, missing))} (its fields: "
                 f"{', '.join(map(str, row))})")
      continue
    found = _answers(row, answers)
    if isinstance(found, str):
      skips.skip(path, line, found)
      continue
    text = row[context]
    wrong = [(a, s) for a, s in found if text[s:s + len(a)] != a]
    if wrong:
      a, s = wrong[0]
      skips.skip(path, line, f"answer {a!r} is not the context's text at {answers}_start={s} "
                 f"({text[s:s + len(a)]!r}); answer_start counts the context's characters "
                 "from 0")
      continue
    qid = str(row.get("id", line))
    if qid in ids:
      skips.skip(path, line, f"id {qid!r} was given to an earlier question")
      continue
    ids.add(qid)
    examples.append(SquadExample(
        qid, row[question], text, tuple(a for a, _ in found),
        tuple((s, s + len(a)) for a, s in found), not found, 0))
    if limit and len(examples) >= limit:
      break
  readers.require_rows(path, len(examples), skips,
                       f"rows with {question!r}, {context!r} and {answers!r}")
  return examples


def _answers(row: dict, field: str) -> list[tuple[str, int]] | str:
  """[(answer text, start)] of a row ([] when the context does not answer), or what is
  wrong with it."""
  value = row.get(field)
  if isinstance(value, str) and value.strip().startswith("{"):  # a CSV cell holding JSON
    try:
      value = json.loads(value)
    except json.JSONDecodeError:
      pass
  if isinstance(value, dict):
    texts, starts = value.get("text"), value.get("answer_start")
  elif isinstance(value, str):
    texts, starts = [value] if value else [], [row.get(f"{field}_start")] if value else []
  else:
    return (f"no answer {field!r}: give {field!r} as {{'text': [...], 'answer_start': [...]}} "
            f"or as a text with {field + '_start'!r} (its fields: {', '.join(map(str, row))})")
  if not isinstance(texts, list) or not isinstance(starts, list) or len(texts) != len(starts):
    return f"{field!r} needs as many 'text' as 'answer_start' entries, in two lists"
  pairs = []
  for text, start in zip(texts, starts):
    if isinstance(start, str) and start.strip().isdigit():  # a CSV / TSV cell
      start = int(start)
    if not isinstance(text, str) or not text or not isinstance(start, int) or isinstance(
        start, bool) or start < 0:
      return (f"answer {text!r} at {start!r}: an answer is a non-empty text and its start, a "
              "character offset >= 0")
    pairs.append((text, start))
  return pairs
