"""The pretraining corpus of the paper tables at CPU scale, and its vocabulary.

Everything the shared data and the Python install hold as running English text:

  c4          the 1,000 real C4 en train documents (validation: its 200 documents)
  wikitext2   WikiText-2 valid + test (raw), one document per article (`= Title =` lines)
  stdlib      the embedded corpus (bertjax.data.corpus: the standard library's docstrings)

Every document is written one sentence per line (what NSP / SOP / segment-pair recipes
split on) into `train.jsonl.gz` / `validation.jsonl.gz`, plus a vocabulary trained on the
train split and `stats.json` (documents, sentences and tokens per part). The vocabulary is
one of

  wordpiece      BERT's: special tokens first, lower-cased (`wordpiece/`; the default)
  sentencepiece  T5's: a cased unigram SentencePiece in T5's id layout (<pad>=0, </s>=1,
                 <unk>=2) plus 100 extra ids on top, the span-corruption sentinels
                 (`sentencepiece/spiece.model`)

`build(out, size, vocabulary)` is deterministic and `size='tiny'` keeps the first sentences
of a handful of documents of each part (tests: a few thousand tokens, so that even static
masking's ten copies are quick).
"""
import gzip
import hashlib
import json
import os
import re
import shutil
from typing import Iterator

from bertjax import paths

# (documents per part, sentences per document); None: all.
SIZES = {"cpu": (None, None), "tiny": (8, 12)}
VOCABULARIES = ("wordpiece", "sentencepiece")
# Ids per vocabulary, sentinels included (T5's pieces fill all but the last 100).
VOCAB_SIZES = {"cpu": 8192, "tiny": 600}
SENTENCEPIECE_SIZES = {"cpu": 4096, "tiny": 600}
SENTINELS = 100
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


def build(out: str, size: str = "cpu", vocabulary: str = "wordpiece") -> dict:
  """Writes the corpus, its vocabulary and stats.json into `out` (once; stats.json last,
  so a half-built folder is rebuilt). Returns the stats."""
  if size not in SIZES or vocabulary not in VOCABULARIES:
    raise ValueError(f"Corpus size {size!r} / vocabulary {vocabulary!r}: choose a size "
                     f"of {sorted(SIZES)} and a vocabulary of {VOCABULARIES}.")
  if is_built(out):
    with open(os.path.join(out, STATS_FILE)) as f:
      stats = json.load(f)
    if stats.get("vocabulary", "wordpiece") != vocabulary:
      raise ValueError(f"The corpus in {out} was built with a {stats.get('vocabulary')} "
                       f"vocabulary, not {vocabulary}; remove it or choose another folder.")
    return stats
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
  vocab, vocab_size = _train_vocabulary(
      [s for docs in texts["train"].values() for d in docs for s in d.split("\n")],
      size, vocabulary, tmp)
  stats = {"size": size, "vocabulary": vocabulary, "vocab_size": vocab_size,
           "vocab_sha256": vocabulary_digest(os.path.join(tmp, vocabulary)),
           "parts": {split: {part: _count(vocab, docs) for part, docs in by_part.items()}
                     for split, by_part in texts.items()}}
  for split, by_part in stats["parts"].items():
    stats[f"{split}_tokens"] = sum(p["tokens"] for p in by_part.values())
  with open(os.path.join(tmp, STATS_FILE), "w") as f:
    json.dump(stats, f, indent=2)
  shutil.rmtree(out, ignore_errors=True)
  os.replace(tmp, out)
  return stats


def _train_vocabulary(lines: list[str], size: str, vocabulary: str, out: str):
  """(vocabulary, its number of ids) trained on `lines` into `out`/<vocabulary>."""
  from bertjax.data import vocab_training  # pylint: disable=g-import-not-at-top
  directory = os.path.join(out, vocabulary)
  if vocabulary == "wordpiece":
    vocab = vocab_training.train_wordpiece(lines, VOCAB_SIZES[size], directory)
    return vocab, len(vocab_ids(directory))
  # Every character kept (coverage 1.0) so that any label text round-trips, as
  # bertjax.data.c4's SentencePiece; the trainer may stop short of the size asked.
  vocab = vocab_training.train_sentencepiece(
      lines, SENTENCEPIECE_SIZES[size] - SENTINELS, directory, control_symbols=(),
      character_coverage=1.0, extra_ids=SENTINELS)
  return vocab, vocab.vocab_size


def vocabulary_digest(directory: str) -> str:
  """sha256 of the trained vocabulary's defining file (vocab.txt or spiece.model): two
  builds of a corpus are the same corpus exactly when these agree."""
  name = "vocab.txt" if os.path.isfile(os.path.join(directory, "vocab.txt")) else "spiece.model"
  with open(os.path.join(directory, name), "rb") as f:
    return hashlib.sha256(f.read()).hexdigest()


def vocab_ids(directory: str) -> list[str]:
  with open(os.path.join(directory, "vocab.txt"), encoding="utf-8") as f:
    return f.read().splitlines()


def _count(vocab, documents: list[str]) -> dict:
  tokens = sum(len(vocab.encode(s)) for d in documents for s in d.split("\n"))
  return {"documents": len(documents), "sentences": sum(d.count("\n") + 1 for d in documents),
          "tokens": tokens}


def vocabulary_bindings(out: str, vocabulary: str = "wordpiece",
                        configurable: str = "task_dataset") -> list[str]:
  """What makes `configurable`'s vocabulary the corpus's: a SentencePiece is loaded
  through bertjax.data.c4's loader, which reads a built model from its folder."""
  if vocabulary == "wordpiece":
    return [f"{configurable}.vocabulary = @hf_vocabulary()",
            f"hf_vocabulary.name_or_path = '{os.path.join(out, 'wordpiece')}'"]
  return [f"{configurable}.vocabulary = @c4_sentencepiece()",
          f"c4_sentencepiece.cache_dir = '{os.path.join(out, 'sentencepiece')}'",
          f"c4_sentencepiece.extra_ids = {SENTINELS}"]


def gin_bindings(out: str, vocabulary: str = "wordpiece") -> list[str]:
  """What points a `python -m bertjax.main` run at the corpus and its vocabulary."""
  return ["task_dataset.source = @text_files()",
          f"text_files.train = '{os.path.join(out, 'train.jsonl.gz')}'",
          f"text_files.validation = '{os.path.join(out, 'validation.jsonl.gz')}'",
          "text_files.file_format = 'jsonl'"] + vocabulary_bindings(out, vocabulary)


if __name__ == "__main__":
  import sys  # pylint: disable=g-import-not-at-top
  if len(sys.argv) not in (3, 4) or sys.argv[2] not in SIZES or (
      sys.argv[3:] and sys.argv[3] not in VOCABULARIES):
    sys.exit(f"usage: python -m bertjax.tables.corpus OUT_DIR {{{','.join(SIZES)}}} "
             f"[{'|'.join(VOCABULARIES)}]")
  print(json.dumps(build(*sys.argv[1:]), indent=2))
