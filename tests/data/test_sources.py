"""Local-file and TFDS sources: formats, bad input rules and counters, seqio use."""
import gzip
import json

import pytest
import seqio

from bertjax import paths
from bertjax.data import sources
from bertjax.data import vocabularies

DATA = paths.data_dir()


def _texts(source, split="train"):
  return [ex["text"].decode() for ex in
          source.get_dataset(split, shuffle=False).as_numpy_iterator()]


def test_text_lines_with_bad_input(tmp_path):
  path = tmp_path / "a.txt"
  path.write_bytes(b"first doc\n\n   \nbad \xff\xfe utf8\n" + b"x" * 50 + b"\nlast")
  source = sources.TextFileSource({"train": str(path)}, max_line_chars=20)
  texts = _texts(source)
  assert texts == ["first doc", "bad \ufffd\ufffd utf8", "x" * 20, "last"]
  assert source.stats == {"documents": 4, "empty_documents": 2, "invalid_utf8": 1,
                          "long_lines_truncated": 1}


def test_text_blank_line_documents(tmp_path):
  (tmp_path / "a.txt").write_text("one a\none b\n\n\n\ntwo\n")
  (tmp_path / "b.txt").write_text("three\n")
  source = sources.TextFileSource({"train": str(tmp_path / "*.txt")},
                                  doc_boundary="blank_line")
  assert _texts(source) == ["one a\none b", "two", "three"]
  shuffled = source.get_dataset("train", shuffle=True, seed=3)
  assert sorted(ex["text"] for ex in shuffled.as_numpy_iterator()) == sorted(
      t.encode() for t in _texts(source))


def test_jsonl_gz_with_bad_rows(tmp_path):
  path = tmp_path / "a.jsonl.gz"
  rows = [json.dumps({"text": "good one", "url": "u1"}), "{not json", json.dumps({"txt": 1}),
          json.dumps({"text": ""}), json.dumps({"text": "good two"})]
  with gzip.open(path, "wt") as f:
    f.write("\n".join(rows) + "\n")
  source = sources.TextFileSource({"validation": str(path)}, file_format="jsonl",
                                  extra_fields=("url",))
  examples = list(source.get_dataset("validation", shuffle=False).as_numpy_iterator())
  assert [(e["text"], e["url"]) for e in examples] == [(b"good one", b"u1"), (b"good two", b"")]
  assert source.stats == {"documents": 2, "bad_rows": 2, "empty_documents": 1}


def test_tsv_with_header_and_short_rows(tmp_path):
  path = tmp_path / "a.tsv"
  path.write_text("\ufeffid\tsentence\tlabel\n1\thello there\t0\n2\n3\tgood\t1\n")
  source = sources.TextFileSource({"train": str(path)}, file_format="tsv",
                                  text_field="sentence", extra_fields=("label",))
  examples = list(source.get_dataset("train", shuffle=False).as_numpy_iterator())
  assert [(e["text"], e["label"]) for e in examples] == [(b"hello there", b"0"), (b"good", b"1")]
  assert source.stats["bad_rows"] == 1


def test_missing_files_and_bad_options(tmp_path):
  with pytest.raises(FileNotFoundError, match="nothing"):
    sources.TextFileSource({"train": str(tmp_path / "nothing*")}).list_shards("train")
  with pytest.raises(ValueError, match="file_format"):
    sources.TextFileSource({"train": "x"}, file_format="csv")


@pytest.mark.skipif(not (DATA / "c4").is_dir(), reason="shared data folder absent")
def test_real_c4_jsonl_and_glue_tsv():
  c4 = sources.TextFileSource(
      {"validation": str(DATA / "c4" / "c4-en-sample-validation.200.jsonl.gz")},
      file_format="jsonl", extra_fields=("url", "timestamp"))
  assert len(_texts(c4, "validation")) == 200 and c4.stats["bad_rows"] == 0
  sst = sources.TextFileSource({"validation": str(DATA / "glue" / "SST-2" / "dev.tsv")},
                               file_format="tsv", text_field="sentence",
                               extra_fields=("label",))
  assert len(_texts(sst, "validation")) == 872


@pytest.mark.skipif(not (DATA / "c4").is_dir(), reason="shared data folder absent")
def test_tfds_prepared_directory_matches_jsonl():
  source = sources.TfdsTextSource(str(DATA / "c4" / "tfds_c4_en_3.0.1_minimal"))
  assert set(source.splits) == {"train", "validation"}
  assert source.num_input_examples("validation") == 200
  tfds_texts = _texts(source, "validation")
  jsonl = sources.TextFileSource(
      {"validation": str(DATA / "c4" / "c4-en-sample-validation.200.jsonl.gz")},
      file_format="jsonl")
  assert sorted(tfds_texts) == sorted(_texts(jsonl, "validation"))
  assert source.stats == {"documents": 200}
  with pytest.raises(ValueError, match="data_dir"):
    sources.TfdsTextSource("c4/en:3.0.1")


def test_source_feeds_a_seqio_task(tmp_path):
  path = tmp_path / "a.txt"
  path.write_text("hello world\nthe cat sat\n")
  vocab_file = DATA / "tokenizers" / "bert-base-uncased" / "vocab.txt"
  if not vocab_file.exists():
    pytest.skip("shared data folder absent")
  vocab = vocabularies.WordPieceVocabulary(str(vocab_file))
  task = seqio.Task(
      "bertjax_test_sources_task", source=sources.TextFileSource({"train": str(path)}),
      preprocessors=[seqio.preprocessors.tokenize],
      output_features={"text": seqio.Feature(vocab, add_eos=False)})
  out = list(task.get_dataset({"text": 8}, split="train", shuffle=False).as_numpy_iterator())
  assert [ex["text"].tolist() for ex in out] == [vocab.encode("hello world"),
                                                 vocab.encode("the cat sat")]
  seqio.TaskRegistry.remove("bertjax_test_sources_task")
