"""The CPU-scale pretraining corpus: sentences on lines, every part counted, deterministic."""
import gzip
import json

import pytest

from bertjax.tables import corpus

WIKI = (" \n = Lobster = \n \n The lobster is red. It lives in the sea .\n \n"
        " = = Biology = = \n \n It has two claws. They are large.\n"
        " = Crab = \n \n A crab walks sideways. It is small.\n")
C4 = [{"text": "Posted on April 12.\nBuy now. Cheap prices here!\nSecond line."},
      {"text": "one line only without a stop"}]


@pytest.fixture()
def data_dir(tmp_path, monkeypatch):
  (tmp_path / "wikitext2" / "raw").mkdir(parents=True)
  for name in ("wiki.valid.raw", "wiki.test.raw"):
    (tmp_path / "wikitext2" / "raw" / name).write_text(WIKI)
  (tmp_path / "c4").mkdir()
  for split in ("train.1000", "validation.200"):
    with gzip.open(tmp_path / "c4" / f"c4-en-sample-{split}.jsonl.gz", "wt") as f:
      f.writelines(json.dumps(row) + "\n" for row in C4)
  monkeypatch.setenv("BERTJAX_DATA_DIR", str(tmp_path))
  monkeypatch.setattr(corpus, "stdlib_documents", lambda: iter(["First doc.\nSecond line."]))
  return tmp_path


def test_sentences_split_after_terminal_punctuation():
  assert corpus.sentences("It is 3.5 m long. It swims! Does it? yes.") == [
      "It is 3.5 m long.", "It swims!", "Does it? yes."]


def test_wikitext_articles_drop_headings(data_dir):
  docs = list(corpus.wikitext_documents())
  assert docs[:2] == ["The lobster is red.\nIt lives in the sea .\nIt has two claws.\n"
                      "They are large.", "A crab walks sideways.\nIt is small."]
  assert len(docs) == 4  # valid + test


def test_build_counts_parts_and_is_deterministic(data_dir, tmp_path):
  stats = corpus.build(str(tmp_path / "one"), "tiny")
  again = corpus.build(str(tmp_path / "two"), "tiny")
  assert stats == again
  read = lambda d, s: gzip.open(tmp_path / d / f"{s}.jsonl.gz", "rt").read()
  assert read("one", "train") == read("two", "train")
  rows = [json.loads(line) for line in read("one", "train").splitlines()]
  assert {r["source"] for r in rows} == {"c4", "wikitext2", "stdlib"}
  assert all(r["text"].count("\n") >= 1 for r in rows)  # single-line documents dropped
  train = stats["parts"]["train"]
  assert train["c4"]["documents"] == 1 and train["c4"]["sentences"] == 4
  assert stats["train_tokens"] == sum(p["tokens"] for p in train.values()) > 0
  assert set(stats["parts"]["validation"]) == {"c4"}
  bindings = corpus.gin_bindings(str(tmp_path / "one"))
  assert f"hf_vocabulary.name_or_path = '{tmp_path / 'one' / 'wordpiece'}'" in bindings
  assert corpus.build(str(tmp_path / "one"), "cpu") == stats  # built: never rebuilt


def test_sentencepiece_corpus_has_t5_ids_and_sentinels(data_dir, tmp_path):
  from bertjax.data import c4  # pylint: disable=g-import-not-at-top
  out = str(tmp_path / "spm")
  stats = corpus.build(out, "tiny", "sentencepiece")
  bindings = corpus.gin_bindings(out, "sentencepiece")
  assert f"c4_sentencepiece.cache_dir = '{out}/sentencepiece'" in bindings
  vocab = c4.c4_sentencepiece(cache_dir=f"{out}/sentencepiece", extra_ids=corpus.SENTINELS)
  assert (vocab.pad_id, vocab.eos_id, vocab.unk_id) == (0, 1, 2)
  assert stats["vocabulary"] == "sentencepiece" and stats["vocab_size"] == vocab.vocab_size
  assert vocab.decode([vocab.vocab_size - 1]) == "<extra_id_0>"  # the first sentinel
  assert vocab.decode(vocab.encode("The lobster is red.")) == "The lobster is red."  # cased
  assert stats["train_tokens"] == sum(p["tokens"] for p in stats["parts"]["train"].values())
  with pytest.raises(ValueError, match="sentencepiece vocabulary, not wordpiece"):
    corpus.build(out, "tiny")
