"""The pretraining corpus of the paper tables, and its vocabulary.

The text is Wikipedia + books (`bertjax.data.wiki_books`: the train split without the
held-out and SQuAD / WikiText articles; the held-out articles as validation):

  cpu   the whole corpus, streamed by the runs themselves through the `wiki_books()`
        source; this folder holds only the vocabulary and `stats.json`
  tiny  (tests) the first sentences of a few documents of each part, written out as
        `train.jsonl.gz` / `validation.jsonl.gz`

`build(out, size, vocabulary)` trains the vocabulary on the train text (at cpu, on every
`VOCAB_SAMPLE_EVERY`-th document) and writes `stats.json` last: documents, sentences, words
and tokens per split and part, and at cpu the held-out text's cross-entropy under count
models of the train text (`bertjax.evaluation.ngram`), which a masked LM's held-out loss is
judged against (experiments/scale). It is deterministic. The vocabulary is one of

  wordpiece      BERT's: special tokens first, lower-cased (`wordpiece/`; the default)
  sentencepiece  T5's: a cased unigram SentencePiece in T5's id layout (<pad>=0, </s>=1,
                 <unk>=2) plus 100 extra ids on top, the span-corruption sentinels
                 (`sentencepiece/spiece.model`)
"""
import collections
import gzip
import hashlib
import itertools
import json
import os
import shutil
from typing import Callable, Iterator

from bertjax.data import wiki_books

SIZES = ("cpu", "tiny")
VOCABULARIES = ("wordpiece", "sentencepiece")
# Ids per vocabulary, sentinels included (T5's pieces fill all but the last 100).
VOCAB_SIZES = {"cpu": 8192, "tiny": 600}
SENTENCEPIECE_SIZES = {"cpu": 4096, "tiny": 600}
SENTINELS = 100
STATS_FILE = "stats.json"
VOCAB_SAMPLE_EVERY = 5  # cpu: the vocabulary is trained on every 5th train document
TINY_DOCUMENTS, TINY_SENTENCES = 8, 12
ENCODE_BATCH = 2048


def _tiny_documents(split: str) -> dict[str, list[str]]:
  """Per part, the first TINY_DOCUMENTS documents (of at least two sentences) cut to
  TINY_SENTENCES sentences."""
  stats = collections.Counter()
  parts = {}
  for part in wiki_books.PARTS if split == "train" else ("wikipedia",):
    docs = (d for path in wiki_books.files(part)
            for d in wiki_books.documents(split, [path], stats, TINY_SENTENCES,
                                          wiki_books.overlap_ids()))
    parts[part] = list(itertools.islice((d for d in docs if "\n" in d), TINY_DOCUMENTS))
  return parts


def is_built(out: str) -> bool:
  return os.path.isfile(os.path.join(out, STATS_FILE))


def build(out: str, size: str = "cpu", vocabulary: str = "wordpiece") -> dict:
  """Writes the vocabulary, the tiny corpus's text and stats.json into `out` (once;
  stats.json last, so a half-built folder is rebuilt). Returns the stats."""
  if size not in SIZES or vocabulary not in VOCABULARIES:
    raise ValueError(f"Corpus size {size!r} / vocabulary {vocabulary!r}: choose a size "
                     f"of {list(SIZES)} and a vocabulary of {VOCABULARIES}.")
  if is_built(out):
    with open(os.path.join(out, STATS_FILE)) as f:
      stats = json.load(f)
    if stats.get("vocabulary", "wordpiece") != vocabulary:
      raise ValueError(f"The corpus in {out} was built with a {stats.get('vocabulary')} "
                       f"vocabulary, not {vocabulary}; remove it or choose another folder.")
    return stats
  tmp = f"{out}.tmp{os.getpid()}"
  shutil.rmtree(tmp, ignore_errors=True)
  os.makedirs(tmp)
  if size == "tiny":
    texts = {split: _tiny_documents(split) for split in ("train", "validation")}
    for split, parts in texts.items():
      with gzip.open(os.path.join(tmp, f"{split}.jsonl.gz"), "wt", encoding="utf-8") as f:
        f.writelines(json.dumps({"text": d, "source": part}) + "\n"
                     for part, docs in parts.items() for d in docs)
    lines = [s for docs in texts["train"].values() for d in docs for s in d.split("\n")]
    split_documents = lambda split: ((p, d) for p, docs in texts[split].items() for d in docs)
  else:
    source = wiki_books.wiki_books()
    lines = [s for d in itertools.islice(source.documents("train"), 0, None,
                                         VOCAB_SAMPLE_EVERY) for s in d.split("\n")]
    split_documents = lambda split: _parts_of(source, split)
  vocab_size = _train_vocabulary(lines, size, vocabulary, tmp)
  del lines
  stats = {"size": size, "vocabulary": vocabulary, "vocab_size": vocab_size,
           "vocab_sha256": vocabulary_digest(os.path.join(tmp, vocabulary)),
           **_count(split_documents, _encoder(os.path.join(tmp, vocabulary)), vocab_size,
                    baselines=size == "cpu")}
  with open(os.path.join(tmp, STATS_FILE), "w") as f:
    json.dump(stats, f, indent=2)
  shutil.rmtree(out, ignore_errors=True)
  os.replace(tmp, out)
  return stats


def _parts_of(source: wiki_books.WikiBooksSource, split: str) -> Iterator[tuple[str, str]]:
  """(part, document) of a split, in the source's order, parted by the file read."""
  for path in source.list_shards(split):
    part = "gutenberg" if path.endswith(".txt.gz") else "wikipedia"
    for document in wiki_books.documents(split, [path], source.stats, overlap=source._overlap):
      yield part, document


def _count(split_documents: Callable, encode: Callable, vocab_size: int,
           baselines: bool) -> dict:
  """Per split and part: documents, sentences, words, tokens; with `baselines`, the
  held-out tokens' cross-entropy under the train text's unigram and bigram."""
  from bertjax.evaluation import ngram  # pylint: disable=g-import-not-at-top
  counts = ngram.NgramCounts(vocab_size)
  result, held_out = {"parts": {}}, []
  for split in ("train", "validation"):
    parts = collections.defaultdict(collections.Counter)
    for batch in _batched(split_documents(split), ENCODE_BATCH):
      for (part, document), ids in zip(batch, encode([d for _, d in batch])):
        parts[part].update(documents=1, sentences=document.count("\n") + 1,
                           words=len(document.split()), tokens=len(ids))
        if baselines:
          (counts.add if split == "train" else held_out.append)(ids)
    result["parts"][split] = {p: dict(c) for p, c in parts.items()}
    result[f"{split}_tokens"] = sum(c["tokens"] for c in parts.values())
  if baselines:
    result["held_out_cross_entropy"] = counts.cross_entropy(held_out)
  return result


def _batched(items, n: int):
  it = iter(items)
  while batch := list(itertools.islice(it, n)):
    yield batch


def _encoder(directory: str) -> Callable[[list[str]], list[list[int]]]:
  """The vocabulary's fast tokenizer over whole documents (sentences joined as the
  recipes see them; special tokens left out)."""
  if os.path.isfile(os.path.join(directory, "tokenizer.json")):
    import tokenizers  # pylint: disable=g-import-not-at-top
    tokenizer = tokenizers.Tokenizer.from_file(os.path.join(directory, "tokenizer.json"))
    return lambda texts: [e.ids for e in tokenizer.encode_batch(
        [t.replace("\n", " ") for t in texts], add_special_tokens=False)]
  import sentencepiece  # pylint: disable=g-import-not-at-top
  processor = sentencepiece.SentencePieceProcessor(
      model_file=os.path.join(directory, "spiece.model"))
  return lambda texts: processor.encode([t.replace("\n", " ") for t in texts])


def _train_vocabulary(lines: list[str], size: str, vocabulary: str, out: str) -> int:
  """Trains the vocabulary on `lines` into `out`/<vocabulary>; returns its number of ids."""
  from bertjax.data import vocab_training  # pylint: disable=g-import-not-at-top
  directory = os.path.join(out, vocabulary)
  if vocabulary == "wordpiece":
    vocab_training.train_wordpiece(lines, VOCAB_SIZES[size], directory)
    return len(vocab_ids(directory))
  # Every character kept (coverage 1.0) so that any label text round-trips, as
  # bertjax.data.c4's SentencePiece; the trainer may stop short of the size asked.
  vocab = vocab_training.train_sentencepiece(
      lines, SENTENCEPIECE_SIZES[size] - SENTINELS, directory, control_symbols=(),
      character_coverage=1.0, extra_ids=SENTINELS)
  return vocab.vocab_size


def vocabulary_digest(directory: str) -> str:
  """sha256 of the trained vocabulary's defining file (vocab.txt or spiece.model): two
  builds of a corpus are the same corpus exactly when these agree."""
  name = "vocab.txt" if os.path.isfile(os.path.join(directory, "vocab.txt")) else "spiece.model"
  with open(os.path.join(directory, name), "rb") as f:
    return hashlib.sha256(f.read()).hexdigest()


def vocab_ids(directory: str) -> list[str]:
  with open(os.path.join(directory, "vocab.txt"), encoding="utf-8") as f:
    return f.read().splitlines()


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


def gin_bindings(out: str, vocabulary: str = "wordpiece", size: str = "cpu") -> list[str]:
  """What points a `python -m bertjax.main` run at the corpus of `size` in `out` and its
  vocabulary: the wiki_books source itself at cpu, the written files at tiny."""
  if size == "cpu":
    source = ["task_dataset.source = @wiki_books()"]
  else:
    source = ["task_dataset.source = @text_files()",
              f"text_files.train = '{os.path.join(out, 'train.jsonl.gz')}'",
              f"text_files.validation = '{os.path.join(out, 'validation.jsonl.gz')}'",
              "text_files.file_format = 'jsonl'"]
  return source + vocabulary_bindings(out, vocabulary)


if __name__ == "__main__":
  import sys  # pylint: disable=g-import-not-at-top
  if len(sys.argv) not in (3, 4) or sys.argv[2] not in SIZES or (
      sys.argv[3:] and sys.argv[3] not in VOCABULARIES):
    sys.exit(f"usage: python -m bertjax.tables.corpus OUT_DIR {{{','.join(SIZES)}}} "
             f"[{'|'.join(VOCABULARIES)}]")
  print(json.dumps(build(*sys.argv[1:]), indent=2))
