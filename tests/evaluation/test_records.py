"""`readers.read_records`: your own .tsv / .csv / .jsonl rows as {column: value}, the rows
it cannot read skipped with their line."""
import json

import pytest

from bertjax.evaluation import readers


def test_the_three_formats_give_the_same_rows(tmp_path):
  rows = [{"text": 'a "quoted" word', "label": "x"}, {"text": "b, c", "label": "y"}]
  (tmp_path / "a.tsv").write_text("text\tlabel\n" + "".join(f"{r['text']}\t{r['label']}\n"
                                                           for r in rows))
  (tmp_path / "a.csv").write_text('text,label\n"a ""quoted"" word",x\n"b, c",y\n')
  (tmp_path / "a.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
  for name in ("a.tsv", "a.csv", "a.jsonl"):
    skips = readers.SkipLog()
    assert [row for _, row in readers.read_records(str(tmp_path / name), skips)] == rows, name
    assert not skips


def test_unreadable_rows_are_skipped_with_their_line(tmp_path):
  (tmp_path / "a.jsonl").write_text('{"text": "ok"}\n"a string"\n[1, 2]\n{oops\n')
  (tmp_path / "a.csv").write_text("text,label\nok,x\ntoo,many,fields\n")
  skips = readers.SkipLog()
  found = list(readers.read_records(str(tmp_path / "a.jsonl"), skips))
  assert found == [(1, {"text": "ok"}), (2, {"text": "a string"})]
  assert [(e.line, e.reason.split(" (")[0]) for e in skips.entries] == [
      (3, "a JSON list, not an object or a string"), (4, "not JSON")]
  assert [line for line, _ in readers.read_records(str(tmp_path / "a.csv"), skips)] == [2]
  assert skips.entries[-1].line == 3
  with pytest.raises(ValueError, match=r"give a \.csv, \.tsv or \.jsonl"):
    list(readers.read_records(str(tmp_path / "a.txt"), skips))
