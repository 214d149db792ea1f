"""A miniature of <data>/pretraining/ (WikiExtractor files, a Gutenberg book with its
licence, OVERLAP.tsv) for the tests of bertjax.data.wiki_books and the tables' corpus."""
import gzip
import pathlib

ARTICLES = [
    (100, "Held Out", "Held Out\n\nThe held-out article is here. It has two sentences.\n"),
    (7, "Lobster", "Lobster\n\nLobsters (; from Old English) live in the sea.<br> They are "
     "red [ [update]] when cooked.\nBiology.\n #if: {{a}}\nThe claw has formula_1 teeth. "
     "The claws are large.\n"),
    (21632, "Nero", "Nero\n\nNero was an emperor. He is in WikiText-2.\n"),
    (9, "Crab", "Crab\n\nA crab walks sideways. It is small.\n"),
]
BOOK = """The Project Gutenberg EBook of Tales, by Someone

This eBook is for the use of anyone anywhere at no cost.

*** START OF THIS PROJECT GUTENBERG EBOOK TALES ***

Produced by A. Volunteer


CHAPTER I.

It was a dark and stormy
night. The rain fell in
torrents.

[Illustration: a storm]

"Who is there?" she asked. _Nobody_ answered.

*** END OF THIS PROJECT GUTENBERG EBOOK TALES ***

This file should be named tales.txt; Project Gutenberg licence text.
"""


def article(page_id, title, body):
  return (f'<doc id="{page_id}" url="http://en.wikipedia.org/wiki?curid={page_id}" '
          f'title="{title}">\n{body}</doc>\n')


def write(data_dir: pathlib.Path) -> pathlib.Path:
  """Writes data_dir/pretraining (point BERTJAX_DATA_DIR at data_dir) and returns it."""
  root = data_dir / "pretraining"
  (root / "wikipedia" / "AA").mkdir(parents=True)
  with gzip.open(root / "wikipedia" / "AA" / "wiki_00.gz", "wt") as f:
    f.write("".join(article(*a) for a in ARTICLES[:2]))
  with gzip.open(root / "wikipedia" / "AA" / "wiki_01.gz", "wt") as f:
    f.write("".join(article(*a) for a in ARTICLES[2:]))
  (root / "wikipedia" / "OVERLAP.tsv").write_text(
      "doc_id\ttitle\toverlaps_with\n21632\tNero\tWikiText-2 valid/test\n")
  (root / "gutenberg" / "Someone").mkdir(parents=True)
  with gzip.open(root / "gutenberg" / "Someone" / "Tales.txt.gz", "wt") as f:
    f.write(BOOK)
  with gzip.open(root / "gutenberg" / "Someone" / "No Licence.txt.gz", "wt") as f:
    f.write("A book whose licence header is missing.\n\nIt is left out.\n")
  return root
