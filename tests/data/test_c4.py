"""C4 cleaning agrees with tensorflow_datasets' own C4 code, page by page."""
import collections
import gzip
import json

import pytest
import tensorflow as tf
from tensorflow_datasets.text import c4_utils

from bertjax import paths
from bertjax.data.preprocessors import c4

DATA = paths.data_dir()
if not (DATA / "c4").is_dir():
  pytest.skip("shared data folder absent", allow_module_level=True)
WET = DATA / "raw_web" / "commoncrawl_whirlwind" / "whirlwind.warc.wet"

GOOD = ("The committee met on Tuesday to discuss the budget for next year. "
        "Members agreed that the library needs a new roof before winter. "
        "A vote on the final plan is expected early next month.")
DIRTY = [
    GOOD,
    GOOD + "\nThis site uses cookies to improve your experience on it.\nHome | About",
    GOOD + "\nPlease enable JavaScript in your browser to view this page.",
    GOOD + "\nLorem ipsum dolor sit amet, consectetur adipiscing elit.",
    GOOD + "\nfunction f() { return 1; } is the code we run here.",
    GOOD + "\nRead our Privacy Policy and Terms of Use before you continue.",
    "Too short.\nAlso short!\nMenu\nLogin",
    GOOD + "\nThe result [1] was confirmed by a second study [citation needed].",
    GOOD + "\n" + "x" * 1200 + " is a very long word in this line.",
    GOOD + "\nAnd then the story continues with more to come...",
    "Only one sentence here that has enough words to count.",
    '"Quoted lines end with a quote mark and still count as real sentences," he said.\n' + GOOD,
    "",
]


@pytest.fixture(autouse=True)
def _tfds_without_network_or_beam(monkeypatch):
  """TFDS's C4 code counts with Beam metrics and splits sentences with NLTK punkt
  (a download); both are swapped for local stand-ins, the rest is TFDS's own code."""
  counters = collections.Counter()
  monkeypatch.setattr(c4_utils, "_get_sentences", c4.split_sentences)
  monkeypatch.setattr(c4_utils, "get_counter_inc_fn",
                      lambda namespace: lambda name, amt=1: counters.update({name: amt}))
  return counters


def _real_pages(n=300):
  with gzip.open(DATA / "c4" / "c4-en-sample-train.1000.jsonl.gz", "rt") as f:
    return [json.loads(line)["text"] for _, line in zip(range(n), f)]


def _wet_pages():
  return list(c4.split_wet(WET.read_text(encoding="utf-8")))


def _tfds_clean(text):
  counters = collections.Counter()
  out = list(c4_utils.get_clean_page_fn()(
      c4_utils.PageFeatures(text=text), counter_inc_fn=lambda k, amt=1: counters.update({k: amt})))
  counters.pop("passed", None)
  return (out[0].text if out else None), counters


def test_clean_page_matches_tfds():
  pages = _real_pages() + [p["text"] for p in _wet_pages()] + DIRTY
  survived = 0
  for text in pages:
    stats = collections.Counter()
    ours = c4.clean_page(text, stats=stats)
    theirs, their_stats = _tfds_clean(text)
    assert ours == theirs, text[:200]
    assert stats == their_stats, text[:200]
    survived += ours is not None
  assert survived >= 0.9 * 300  # real C4 pages are already clean


def test_dirty_pages_are_counted():
  stats = collections.Counter()
  results = [c4.clean_page(t, stats=stats) for t in DIRTY]
  assert results[0] == GOOD and results[1] == GOOD and results[5] == GOOD
  assert results[3] is None and results[4] is None and results[6] is None
  assert "[1]" not in results[7] and "[citation needed]" not in results[7]
  for key in ("line-filtered:policy", "line-filtered:javascript", "filtered:loremipsum",
              "filtered:squigglybracket", "filtered:too_few_sentences",
              "line-filtered:too_long_word", "line-filtered:no_endmark",
              "line-filtered:too_short"):
    assert stats[key] >= 1, key


def test_split_wet_matches_tfds(tmp_path):
  gz = tmp_path / "page.warc.wet.gz"
  gz.write_bytes(gzip.compress(WET.read_bytes()))
  theirs = list(c4_utils.split_wet_file(str(gz), counter_inc_fn=lambda *a: None))
  ours = _wet_pages()
  assert [(p["url"], p["timestamp"], p["text"]) for p in ours] == [
      (p.url, p.timestamp, p.text) for p in theirs]
  assert len(ours) == 1 and ours[0]["url"].startswith("https://an.wikipedia.org/")


def test_badwords_match_tfds(tmp_path):
  words = ["badword", "worse thing"]
  (tmp_path / "badwords.txt").write_text("\n".join(words) + "\n")
  regex = c4.load_badwords(str(tmp_path / "badwords.txt"))
  tfds_filter = c4_utils.get_badwords_filter_fn({"en": words})
  texts = [GOOD, GOOD + " A badword here.", GOOD + " Badwords is fine.", "badword at start",
           "some worse thing.", "aworse things", "(badword)"]
  for text in texts:
    page = c4_utils.PageFeatures(text=text, language="en", normalized_url="x")
    assert (regex.search(text.lower()) is None) == tfds_filter(page), text


def test_english_detection_matches_tfds():
  pages = _real_pages(40) + [p["text"] for p in _wet_pages()]
  for text in pages:
    theirs = bool(list(c4_utils.detect_english(c4_utils.PageFeatures(text=text))))
    probability = c4.english_probability(text)
    assert (probability is not None and probability >= 0.99) == theirs
  assert c4.english_probability(_wet_pages()[0]["text"]) < 0.5  # Aragonese Wikipedia


def test_line_dedupe_matches_tfds_removal():
  pages = _real_pages(60)
  pages = pages + [pages[3], pages[5].split("\n")[0] + "\n" + pages[7]]
  cleaner = c4.C4Cleaner(c4.C4Config(english_min_probability=None, dedupe_span_sentences=0))
  seen = set()
  for url, text in enumerate(pages):
    ours = cleaner.remove_duplicate_lines(text)
    hashes = [c4_utils._hash_text(l.strip().lower()) for l in text.split("\n")]
    keep = [h for h in dict.fromkeys(hashes) if h not in seen]  # first page wins
    seen.update(hashes)
    counters = collections.Counter()
    out = list(c4_utils._remove_lines_from_text(
        (str(url), {"pages": [c4_utils.PageFeatures(url=str(url), text=text)],
                    "lines": keep}),
        counter_inc_fn=lambda k, amt=1: counters.update({k: amt}), min_num_sentences=0))
    assert ours == (out[0].text if out else "")
  assert cleaner.stats["line-filtered:global_duplicate"] > 0


def test_span_dedupe_keeps_first_occurrence():
  cleaner = c4.C4Cleaner(c4.C4Config(english_min_probability=None, dedupe_lines=False))
  other = ("Rain is expected across the region on Friday afternoon. Forecasters warn of "
           "strong winds near the coast. Drivers should plan for delays on the bridge.")
  assert cleaner(GOOD) == GOOD
  assert cleaner(other + " " + GOOD) == other  # the repeated 3-sentence span goes
  assert cleaner(GOOD) is None  # nothing new left
  assert cleaner.stats["sentence-filtered:duplicate_span"] == 6


def test_seqio_preprocessor_on_real_pages(tmp_path):
  (tmp_path / "bad.txt").write_text("roof\n")
  pages = _real_pages(40) + [p["text"] for p in _wet_pages()] + DIRTY
  ds = tf.data.Dataset.from_tensor_slices({"text": pages, "id": list(range(len(pages)))})
  cleaner = c4.C4Cleaner(c4.C4Config(badwords_file=str(tmp_path / "bad.txt")))
  out = list(cleaner.preprocessor(ds).as_numpy_iterator())
  assert 30 <= len(out) < len(pages)
  assert all(ex["text"] for ex in out)
  assert cleaner.stats["passed"] == len(out)
  assert cleaner.stats["passed"] + cleaner.stats["rejected"] == len(pages)
  assert cleaner.stats["filtered:badwords"] >= 1  # GOOD mentions a roof
  assert cleaner.stats["filtered:not_english"] + cleaner.stats[
      "filtered:too_few_sentences"] >= 1
  assert not any(c4.badwords_regex(["roof"]).search(ex["text"].decode().lower()) for ex in out)
  assert len(list(c4.clean_c4(ds, c4.C4Config(english_min_probability=None)))) > 30
