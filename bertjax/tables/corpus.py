"""The pretraining corpus of the paper tables at CPU scale, and its WordPiece vocabulary.

Everything the shared data and the Python install hold as running English text:

  c4          the 1,000 real C4 en train documents (validation: its 200 documents)
  wikitext2   WikiText-2 valid + test (raw), one document per article (`= Title =` lines)
  stdlib      the embedded corpus (bertjax.data.corpus: the standard library's docstrings)

Every document is written one sentence per line (what NSP / SOP / segment-pair recipes
split on) into `train.jsonl.gz` / `validation.jsonl.gz`, plus a WordPiece vocabulary
trained on the train split (`wordpiece/`, BERT's special tokens, lower-cased) and
`stats.json` (documents, sentences and WordPiece tokens per part). `build(out, size)` is
deterministic and `size='tiny'` keeps the first sentences of a handful of documents of each
part (tests: a few thousand tokens, so that even static masking's ten copies are quick).
"""
import gzip
import json
import os
import re
import shutil
from typing import Iterator

from bertjax import paths

# (documents per part, sentences per document); None: all.
SIZES = {"cpu": (None, None), "tiny": (8, 12)}
VOCAB_SIZES = {"cpu": 8192, "tiny": 600}
STATS_FILE = "stats.json"
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(])")
_WIKI_TITLE = re.compile(r"^ = [^=].* = $")


def sentences(paragraph: str) -> list[str]:
  """A paragraph cut after terminal punctuation followed by a capital (or digit/quote)."""
  return [s.strip() for s in _SENTENCE_END.split(paragraph) if s.strip()]


def _document(paragraphs) -> str:
  return "\n".join(s for p in paragraphs for s in sentences(p))


def c4_documents(split: str) -> Iterator[str]:
  name = {"train": "c4-en-sample-train.1000", "validation": "c4-en-sample-validation.200"}
  with gzip.open(paths.data_dir() / "c4" / f"{name[split]}.jsonl.gz", "rt",
                 encoding="utf-8") as f:
    for line in f:
      yield _document(json.loads(line)["text"].split("\n"))


def wikitext_documents() -> Iterator[str]:
  """WikiText-2 valid + test articles; headings (`= = Section = =`) are dropped."""
  for name in ("wiki.valid.raw", "wiki.test.raw"):
    article: list[str] = []
    with open(paths.data_dir() / "wikitext2" / "raw" / name, encoding="utf-8") as f:
      for line in f:
        line = line.rstrip("\n")
        if _WIKI_TITLE.match(line):
          if article:
            yield _document(article)
          article = []
        elif line.strip() and not line.strip().startswith("="):
          article.append(line.strip())
    if article:
      yield _document(article)


def stdlib_documents() -> Iterator[str]:
  from bertjax.data import corpus  # pylint: disable=g-import-not-at-top
  yield from corpus.documents("train")


def parts(split: str) -> dict[str, Iterator[str]]:
  if split == "validation":
    return {"c4": c4_documents("validation")}
  return {"c4": c4_documents("train"), "wikitext2": wikitext_documents(),
          "stdlib": stdlib_documents()}


def is_built(out: str) -> bool:
  return os.path.isfile(os.path.join(out, STATS_FILE))


def build(out: str, size: str = "cpu") -> dict:
  """Writes the corpus, its vocabulary and stats.json into `out` (once; stats.json last,
  so a half-built folder is rebuilt). Returns the stats."""
  if is_built(out):
    with open(os.path.join(out, STATS_FILE)) as f:
      return json.load(f)
  documents_limit, sentences_limit = SIZES[size]
  tmp = f"{out}.tmp{os.getpid()}"
  shutil.rmtree(tmp, ignore_errors=True)
  os.makedirs(tmp)
  texts: dict[str, dict[str, list[str]]] = {}
  for split in ("train", "validation"):
    texts[split] = {}
    with gzip.open(os.path.join(tmp, f"{split}.jsonl.gz"), "wt", encoding="utf-8") as f:
      for part, documents in parts(split).items():
        kept = ["\n".join(d.split("\n")[:sentences_limit])
                for d in documents if d.count("\n") >= 1][:documents_limit]
        texts[split][part] = kept
        f.writelines(json.dumps({"text": d, "source": part}) + "\n" for d in kept)
  from bertjax.data import vocab_training  # pylint: disable=g-import-not-at-top
  vocab = vocab_training.train_wordpiece(
      (s for docs in texts["train"].values() for d in docs for s in d.split("\n")),
      VOCAB_SIZES[size], os.path.join(tmp, "wordpiece"))
  stats = {"size": size, "vocab_size": len(vocab_ids(os.path.join(tmp, "wordpiece"))),
           "parts": {split: {part: _count(vocab, docs) for part, docs in by_part.items()}
                     for split, by_part in texts.items()}}
  for split, by_part in stats["parts"].items():
    stats[f"{split}_tokens"] = sum(p["tokens"] for p in by_part.values())
  with open(os.path.join(tmp, STATS_FILE), "w") as f:
    json.dump(stats, f, indent=2)
  shutil.rmtree(out, ignore_errors=True)
  os.replace(tmp, out)
  return stats


def vocab_ids(directory: str) -> list[str]:
  with open(os.path.join(directory, "vocab.txt"), encoding="utf-8") as f:
    return f.read().splitlines()


def _count(vocab, documents: list[str]) -> dict:
  tokens = sum(len(vocab.encode(s)) for d in documents for s in d.split("\n"))
  return {"documents": len(documents), "sentences": sum(d.count("\n") + 1 for d in documents),
          "tokens": tokens}


def gin_bindings(out: str) -> list[str]:
  """What points a `python -m bertjax.main` run at the corpus and its vocabulary."""
  return ["task_dataset.source = @text_files()",
          f"text_files.train = '{os.path.join(out, 'train.jsonl.gz')}'",
          f"text_files.validation = '{os.path.join(out, 'validation.jsonl.gz')}'",
          "text_files.file_format = 'jsonl'",
          "task_dataset.vocabulary = @hf_vocabulary()",
          f"hf_vocabulary.name_or_path = '{os.path.join(out, 'wordpiece')}'"]


if __name__ == "__main__":
  import sys  # pylint: disable=g-import-not-at-top
  if len(sys.argv) != 3 or sys.argv[2] not in SIZES:
    sys.exit(f"usage: python -m bertjax.tables.corpus OUT_DIR {{{','.join(SIZES)}}}")
  print(json.dumps(build(sys.argv[1], sys.argv[2]), indent=2))
