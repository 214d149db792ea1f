"""The character classes asked of HF's tokenizers are kept on disk and read back intact."""
import pytest

from bertjax.data import text_rules

KINDS = ("clean_text", "bert_accents", "strip_accents", "cjk", "punctuation")


@pytest.fixture
def fresh_cache(tmp_path, monkeypatch):
  monkeypatch.setenv("BERTJAX_CACHE_DIR", str(tmp_path))
  text_rules.hf_chars.cache_clear()
  yield tmp_path
  text_rules.hf_chars.cache_clear()


def test_a_cached_class_equals_the_answer_of_tokenizers(fresh_cache):
  first = {kind: text_rules.hf_chars(kind) for kind in KINDS}  # asked, then written
  assert sorted(p.name.split("-")[1] for p in fresh_cache.iterdir()) == sorted(KINDS)
  assert not list(fresh_cache.glob("*.tmp*"))
  text_rules.hf_chars.cache_clear()
  for kind in KINDS:
    assert text_rules.hf_chars(kind) == first[kind] == text_rules._ask_tokenizers(kind)
  assert "\\x{3002}" in first["punctuation"] or "\\x{3001}-\\x{3003}" in first["punctuation"]


def test_a_damaged_cache_file_is_asked_again_and_rewritten(fresh_cache):
  text_rules.hf_chars("cjk")
  (path,) = fresh_cache.iterdir()
  path.write_text("[\\x{4e00}", encoding="utf-8")  # cut short: no closing bracket
  text_rules.hf_chars.cache_clear()
  answer = text_rules.hf_chars("cjk")
  assert answer == text_rules._ask_tokenizers("cjk") and answer.endswith("]")
  assert path.read_text(encoding="utf-8") == answer
