"""The documentation the tests run: README.md and every page of docs/, read as one text.

Commands and snippets may move between pages; the tests find them wherever they are.
"""
import pathlib
import re

from bertjax import paths

README = paths.REPO_ROOT / "README.md"
DOCS = paths.REPO_ROOT / "docs"


def pages() -> list[pathlib.Path]:
  """README.md first (its first block is the set-up commands), then docs/ by name."""
  return [README, *sorted(DOCS.glob("*.md"))]


def text() -> str:
  return "\n".join(page.read_text() for page in pages())


def section(heading: str) -> str:
  """The text under `## heading` (up to the next heading of level 1 or 2), in whichever page
  holds it; exactly one page must."""
  found = []
  for page in pages():
    parts = re.split(rf"^## {re.escape(heading)}\n", page.read_text(), flags=re.M)
    found += [re.split(r"^#{1,2} ", part, flags=re.M)[0] for part in parts[1:]]
  assert len(found) == 1, f"{len(found)} sections '## {heading}' in README.md and docs/"
  return found[0]


def fenced_blocks(language: str, source: str | None = None) -> list[str]:
  return re.findall(rf"^```{language}\n(.*?)^```", text() if source is None else source,
                    re.S | re.M)
