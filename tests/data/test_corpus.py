"""The embedded stdlib corpus: size, determinism, splits, seqio source."""
from bertjax.data import corpus


def test_corpus_is_big_deterministic_and_cached(tmp_path, monkeypatch):
  docs = corpus.load_documents()
  assert len(docs) > 4000 and sum(map(len, docs)) > 2_000_000
  assert all(d.strip() and len(d) >= 80 for d in docs)
  assert len(set(docs)) == len(docs)
  # A fresh cache directory rebuilds the same documents in the same order.
  monkeypatch.setenv("BERTJAX_CACHE_DIR", str(tmp_path))
  assert corpus.load_documents() == docs
  assert list(tmp_path.glob("stdlib-docstrings-*.json"))


def test_documents_hold_sentences_on_lines():
  multi = [d for d in corpus.documents("train") if d.count("\n") >= 2]
  assert len(multi) > 1000  # enough multi-sentence documents for NSP / SOP pairs
  assert all(line.strip() for d in multi[:200] for line in d.split("\n"))


def test_splits_are_disjoint_and_stable():
  train, validation = corpus.documents("train"), corpus.documents("validation")
  assert 50 < len(validation) < len(train) / 20
  assert not set(train) & set(validation)
  assert all(corpus.split_of(d) == "validation" for d in validation)


def test_seqio_source():
  source = corpus.corpus_source()
  assert set(source.splits) == {"train", "validation"}
  texts = [ex["text"].decode() for ex in
           source.get_dataset("validation", shuffle=False).as_numpy_iterator()]
  assert texts == corpus.documents("validation")
  assert source.num_input_examples("train") == len(corpus.documents("train"))
  a = list(source.get_dataset("validation", shuffle=True, seed=1).take(5).as_numpy_iterator())
  b = list(source.get_dataset("validation", shuffle=True, seed=1).take(5).as_numpy_iterator())
  assert a == b
