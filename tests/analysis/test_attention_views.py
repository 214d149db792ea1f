"""Clark et al.'s head statistics on hand-made attentions; heatmap PNGs; the HTML head
view loaded in a real headless browser (Chromium), checking what it shows."""
import os
import re
import shutil
import subprocess

import numpy as np
import pytest

from bertjax.analysis import figures, head_view, statistics

TOKENS = ["[CLS]", "the", "cat", ",", "sat", "[SEP]", "[PAD]"]
MASK = np.array([[1, 1, 1, 1, 1, 1, 0]])


def shifted(offset: int) -> np.ndarray:
  """[q, k] attention of every real query to the real token `offset` away (or itself)."""
  probs = np.zeros((7, 7))
  for q in range(6):
    k = q + offset if 0 <= q + offset < 6 else q
    probs[q, k] = 1.0
  return probs


def attentions() -> np.ndarray:
  """[layers=1, batch=1, heads=4, 7, 7]: previous token, next token, all on [CLS], uniform."""
  uniform = np.zeros((7, 7))
  uniform[:, :6] = 1 / 6
  cls = np.zeros((7, 7))
  cls[:, 0] = 1.0
  return np.stack([shifted(-1), shifted(1), cls, uniform])[None, None]


def test_statistics_of_known_heads():
  stats = statistics.HeadStatistics()
  kinds = statistics.token_kinds([TOKENS], 7, "[CLS]", "[SEP]")
  assert kinds["punctuation"][0].tolist() == [False, False, False, True, False, False, False]
  stats.add(attentions(), MASK, kinds)
  result = {k: v[0] for k, v in stats.result().items()}
  np.testing.assert_allclose(result["previous"], [1, 0, 1 / 5, 1 / 6])  # queries 1..5
  np.testing.assert_allclose(result["next"], [0, 1, 0, 1 / 6])  # queries 0..4
  np.testing.assert_allclose(result["cls"], [2 / 6, 0, 1, 1 / 6])
  np.testing.assert_allclose(result["sep"], [0, 2 / 6, 0, 1 / 6])
  np.testing.assert_allclose(result["punctuation"], [1 / 6, 1 / 6, 0, 1 / 6])
  np.testing.assert_allclose(result["entropy"], [0, 0, 0, np.log(6)], atol=1e-12)
  assert "| previous | 0.342 | 1-1: 1.000, 1-3: 0.200" in statistics.table(stats.result())
  with pytest.raises(ValueError, match=r"attention_mask has shape \(1, 6\)"):
    stats.add(attentions(), MASK[:, :6], kinds)
  assert [statistics.is_punctuation(t) for t in ("##.", "\u0120,", "a.", "--", "\u2581")] == [
      True, True, False, True, False]


def test_heatmaps_are_written(tmp_path):
  probs = attentions()[:, 0, :, :6, :6]
  paths = figures.layer_heatmaps(probs, TOKENS[:6], str(tmp_path))
  paths.append(figures.statistics_figure(
      {n: np.random.default_rng(0).random((2, 4)) for n in statistics.STATISTICS},
      str(tmp_path / "stats.png")))
  for path in paths:
    assert open(path, "rb").read(8) == b"\x89PNG\r\n\x1a\n" and os.path.getsize(path) > 2000
  with pytest.raises(ValueError, match="7 keys"):
    figures.layer_heatmaps(probs, TOKENS, str(tmp_path))


def browser() -> str | None:
  return next((shutil.which(name) for name in ("chromium", "chromium-browser", "google-chrome")
               if shutil.which(name)), None)


def rendered_dom(page, profile) -> str:
  """The DOM after the page's script ran, from headless Chromium (no network, no GPU)."""
  command = [browser(), "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             f"--user-data-dir={profile}", "--virtual-time-budget=5000", "--dump-dom", page]
  return subprocess.run(command, capture_output=True, text=True, timeout=120, check=True).stdout


@pytest.mark.skipif(browser() is None, reason="no Chromium binary (apt-get install chromium)")
def test_head_view_shows_the_attention_in_a_browser(tmp_path):
  probs = attentions()[:, 0, :, :6, :6].repeat(2, axis=0)  # 2 layers
  probs[1] = probs[1, ::-1]  # layer 2: heads in reverse order
  path = head_view.write(str(tmp_path / "view.html"), TOKENS[:6], probs,
                         title="<b>test</b> view")
  html = open(path).read()
  assert "http" not in html.replace("http://www.w3.org/2000/svg", "")  # nothing to fetch
  dom = rendered_dom("file://" + path, tmp_path / "profile")
  assert "&lt;b&gt;test&lt;/b&gt; view" in dom
  for side in ("left", "right"):
    shown = re.findall(rf'class="token {side}-token"[^>]*>([^<]*)<', dom)
    assert shown == ["[CLS]", "the", "cat", ",", "sat", "[SEP]"]
  # Layer 1, all heads: 6 + 6 + 6 one-hot lines and 36 uniform ones.
  assert "layer 1; heads 1,2,3,4; 54 lines" in dom
  edges = re.findall(r'<line [^>]*data-head="(\d)" data-query="(\d)" data-key="(\d)"', dom)
  assert ("0", "3", "2") in edges and ("1", "3", "4") in edges and ("2", "5", "0") in edges
  assert len(re.findall(r'class="head-toggle"', dom)) == 4
  # The fragment picks layer 2 and head 1, which there is the uniform head.
  dom = rendered_dom("file://" + path + "#layer=2&heads=1", tmp_path / "profile")
  assert "layer 2; heads 1; 36 lines" in dom
  assert set(re.findall(r'<line [^>]*data-head="(\d)"', dom)) == {"0"}
