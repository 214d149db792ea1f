"""The Wikipedia + books source: cleaning rules, held-out split, OVERLAP exclusion,
determinism, and (on the shared data) the real files."""
import collections
import gzip
import itertools

import pytest

from bertjax import paths
from bertjax.data import wiki_books
from tests.helpers import pretraining_text
from tests.helpers.pretraining_text import ARTICLES, BOOK


@pytest.fixture()
def pretraining(tmp_path, monkeypatch):
  monkeypatch.setenv("BERTJAX_DATA_DIR", str(tmp_path))
  return pretraining_text.write(tmp_path)


def test_wikipedia_markup_headings_templates_and_placeholders_are_dropped():
  stats = collections.Counter()
  text = wiki_books.clean_article("Lobster", ARTICLES[1][2].splitlines(), stats)
  assert text.split("\n") == ["Lobsters (from Old English) live in the sea.",
                              "They are red when cooked.", "The claws are large."]
  assert stats["wikipedia_headings"] == 1 and stats["wikipedia_template_lines"] == 1
  assert stats["wikipedia_placeholder_sentences"] == 1


def test_gutenberg_keeps_the_body_and_rejoins_wrapped_lines():
  stats = collections.Counter()
  text = wiki_books.clean_book(BOOK, stats)
  assert text.split("\n") == ["It was a dark and stormy night.", "The rain fell in torrents.",
                              '"Who is there?" she asked.', "Nobody answered."]
  assert "Gutenberg" not in text and "Produced" not in text and "CHAPTER" not in text
  assert wiki_books.clean_book("no markers here\n\nat all.\n", stats) is None


def test_splits_hold_out_by_page_id_and_leave_overlap_articles_out(pretraining):
  source = wiki_books.wiki_books()
  train = list(source.documents("train"))
  validation = list(source.documents("validation"))
  assert validation == ["The held-out article is here.\nIt has two sentences."]
  joined = "\n".join(train)
  assert "held-out" not in joined and "Nero" not in joined  # no article in both / OVERLAP out
  assert "A crab walks sideways." in joined and "It was a dark and stormy night." in joined
  assert "licence header is missing" not in joined
  assert source.stats["wikipedia_overlap_articles_left_out"] == 1
  assert source.stats["gutenberg_books_without_licence_start"] == 1


def test_every_article_lands_in_exactly_one_split(pretraining):
  source = wiki_books.wiki_books(parts=("wikipedia",))
  seen = collections.Counter()
  for split in ("train", "validation"):
    for doc in source.documents(split):
      seen[doc.split("\n")[0]] += 1
  assert all(count == 1 for count in seen.values()) and len(seen) == 3  # Nero left out


def test_documents_are_deterministic_and_long_ones_are_cut_into_sections(pretraining):
  one = list(wiki_books.wiki_books(max_document_sentences=2).documents("train", True, 3))
  two = list(wiki_books.wiki_books(max_document_sentences=2).documents("train", True, 3))
  assert one == two
  assert all(d.count("\n") <= 1 for d in one)
  whole = list(wiki_books.wiki_books().documents("train", True, 3))
  assert sorted("\n".join(one).split("\n")) == sorted("\n".join(whole).split("\n"))


def test_round_robin_takes_turns_and_keeps_each_iterator_in_order():
  streams = [iter([f"{name}{i}" for i in range(n)]) for name, n in (("a", 3), ("b", 1), ("c", 2))]
  assert list(wiki_books.round_robin(streams, 2)) == ["a0", "b0", "a1", "c0", "a2", "c1"]


def test_the_seqio_source_yields_text_and_a_truncated_file_is_named(pretraining):
  source = wiki_books.wiki_books()
  rows = list(source.get_dataset("validation", shuffle=False).as_numpy_iterator())
  assert [r["text"].decode() for r in rows] == [
      "The held-out article is here.\nIt has two sentences."]
  path = pretraining / "wikipedia" / "AA" / "wiki_01.gz"
  with gzip.open(path, "wt") as f:
    f.write(pretraining_text.article(*ARTICLES[3])[:-7])  # no </doc>
  with pytest.raises(ValueError, match="wiki_01.gz: the article 9 .* has no </doc>"):
    list(wiki_books.wiki_books().documents("train"))


@pytest.mark.skipif(not (paths.data_dir() / "pretraining").is_dir(),
                    reason="needs ../shared/data/pretraining")
def test_real_files_clean_and_split_as_stated():
  source = wiki_books.WikiBooksSource(directory=str(paths.data_dir() / "pretraining"))
  assert len(source.list_shards("train")) == 606 and len(source.list_shards("validation")) == 300
  held_out = list(itertools.islice(source.documents("validation"), 20))
  train = list(itertools.islice(source.documents("train", True, 0), 200))
  assert not {d.split("\n")[0] for d in held_out} & {d.split("\n")[0] for d in train}
  for text in held_out + train:
    assert "<doc" not in text and "{{" not in text and "<br>" not in text
    assert "PROJECT GUTENBERG" not in text.upper()
