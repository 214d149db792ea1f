"""The tables' pretraining corpus: Wikipedia + books, its vocabulary, its size and the
held-out text's count-model baselines, deterministic."""
import gzip
import json

import pytest

from bertjax.tables import corpus
from tests.helpers import pretraining_text


@pytest.fixture()
def data_dir(tmp_path, monkeypatch):
  monkeypatch.setenv("BERTJAX_DATA_DIR", str(tmp_path / "data"))
  pretraining_text.write(tmp_path / "data")
  return tmp_path / "data"


def test_tiny_build_writes_both_parts_and_is_deterministic(data_dir, tmp_path):
  stats = corpus.build(str(tmp_path / "one"), "tiny")
  again = corpus.build(str(tmp_path / "two"), "tiny")
  assert stats == again
  read = lambda d, s: gzip.open(tmp_path / d / f"{s}.jsonl.gz", "rt").read()
  assert read("one", "train") == read("two", "train")
  rows = [json.loads(line) for line in read("one", "train").splitlines()]
  assert {r["source"] for r in rows} == {"wikipedia", "gutenberg"}
  assert all(r["text"].count("\n") >= 1 for r in rows)  # single-sentence documents dropped
  validation = [json.loads(line)["text"] for line in read("one", "validation").splitlines()]
  assert validation == ["The held-out article is here.\nIt has two sentences."]
  train = stats["parts"]["train"]
  assert train["gutenberg"] == {"documents": 1, "sentences": 4, "words": 19,
                                "tokens": train["gutenberg"]["tokens"]}
  assert stats["train_tokens"] == sum(p["tokens"] for p in train.values()) > 0
  bindings = corpus.gin_bindings(str(tmp_path / "one"), size="tiny")
  assert "text_files.file_format = 'jsonl'" in bindings
  assert f"hf_vocabulary.name_or_path = '{tmp_path / 'one' / 'wordpiece'}'" in bindings
  assert corpus.build(str(tmp_path / "one"), "cpu") == stats  # built: never rebuilt


def test_cpu_build_streams_the_source_and_states_size_and_baselines(data_dir, tmp_path,
                                                                    monkeypatch):
  monkeypatch.setitem(corpus.VOCAB_SIZES, "cpu", 150)
  monkeypatch.setattr(corpus, "VOCAB_SAMPLE_EVERY", 1)
  out = str(tmp_path / "cpu")
  stats = corpus.build(out, "cpu")
  assert corpus.gin_bindings(out)[0] == "task_dataset.source = @wiki_books()"
  assert not (tmp_path / "cpu" / "train.jsonl.gz").exists()  # the runs stream the text
  parts = stats["parts"]
  assert set(parts["train"]) == {"wikipedia", "gutenberg"} and set(parts["validation"]) == {
      "wikipedia"}
  assert parts["train"]["wikipedia"]["documents"] == 2  # Nero (OVERLAP) and the held-out one out
  baselines = stats["held_out_cross_entropy"]
  assert baselines["tokens"] == stats["validation_tokens"] > 0
  assert 0 < baselines["bigram"] and 0 < baselines["unigram"]


def test_sentencepiece_corpus_has_t5_ids_and_sentinels(data_dir, tmp_path):
  from bertjax.data import c4  # pylint: disable=g-import-not-at-top
  out = str(tmp_path / "spm")
  stats = corpus.build(out, "tiny", "sentencepiece")
  bindings = corpus.gin_bindings(out, "sentencepiece", "tiny")
  assert f"c4_sentencepiece.cache_dir = '{out}/sentencepiece'" in bindings
  vocab = c4.c4_sentencepiece(cache_dir=f"{out}/sentencepiece", extra_ids=corpus.SENTINELS)
  assert (vocab.pad_id, vocab.eos_id, vocab.unk_id) == (0, 1, 2)
  assert stats["vocabulary"] == "sentencepiece" and stats["vocab_size"] == vocab.vocab_size
  assert vocab.decode([vocab.vocab_size - 1]) == "<extra_id_0>"  # the first sentinel
  assert vocab.decode(vocab.encode("The claws are large.")) == "The claws are large."  # cased
  assert stats["train_tokens"] == sum(p["tokens"] for p in stats["parts"]["train"].values())
  with pytest.raises(ValueError, match="sentencepiece vocabulary, not wordpiece"):
    corpus.build(out, "tiny")
