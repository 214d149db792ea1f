"""Writes the pretraining corpus of experiments/elmo: documents separated by a blank line,
one sentence per line (what the `bilm` recipe reads through `text_files`).

  train.txt       CoNLL-2003 train text (no tags; one document per -DOCSTART-), WikiText-2
                  valid + test (raw; one document per paragraph) and the 1,000 C4 train
                  documents of the shared data
  validation.txt  the 200 C4 validation documents

Usage: python experiments/elmo/make_corpus.py --out=/tmp/elmo_corpus
"""
import argparse
import os
import re

from bertjax import paths
from bertjax.data import c4

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z\"'(])")
_WIKITEXT_SPLITS = {" @-@ ": "-", " @,@ ": ",", " @.@ ": "."}


def sentences(paragraph: str) -> list[str]:
  return [s.strip() for s in _SENTENCE_END.split(paragraph) if s.strip()]


def conll_documents(file: str) -> list[list[str]]:
  documents, sentence, document = [], [], []
  with open(file, encoding="utf-8") as f:
    for line in f:
      fields = line.split()
      if fields and fields[0] == "-DOCSTART-":
        documents.append(document)
        document = []
      elif fields:
        sentence.append(fields[0])
      elif sentence:
        document.append(" ".join(sentence))
        sentence = []
  return [d for d in documents + [document + ([" ".join(sentence)] if sentence else [])] if d]


def wikitext_documents(file: str) -> list[list[str]]:
  documents = []
  with open(file, encoding="utf-8") as f:
    for line in f:
      line = line.strip()
      if not line or line.startswith("="):  # blank lines and section headings
        continue
      for raw, plain in _WIKITEXT_SPLITS.items():
        line = line.replace(raw, plain)
      documents.append(sentences(line))
  return documents


def c4_documents(split: str) -> list[list[str]]:
  return [[s for line in text.split("\n") for s in sentences(line)]
          for text in c4.documents(split)]


def write(path: str, documents: list[list[str]]) -> int:
  documents = [d for d in documents if d]
  with open(path, "w", encoding="utf-8") as f:
    f.write("\n\n".join("\n".join(d) for d in documents) + "\n")
  return sum(len(s.split()) for d in documents for s in d)


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--out", required=True)
  args = parser.parse_args()
  os.makedirs(args.out, exist_ok=True)
  data = str(paths.data_dir())
  train = conll_documents(os.path.join(data, "conll2003", "train.txt"))
  for name in ("wiki.valid.raw", "wiki.test.raw"):
    train += wikitext_documents(os.path.join(data, "wikitext2", "raw", name))
  train += c4_documents("train")
  print("train words:", write(os.path.join(args.out, "train.txt"), train))
  print("validation words:", write(os.path.join(args.out, "validation.txt"),
                                   c4_documents("validation")))


if __name__ == "__main__":
  main()
