"""Where bertjax finds things on disk: the repository and the shared data folder."""
import os
import pathlib

REPO_ROOT = pathlib.Path(__file__).resolve().parent.parent


def data_dir() -> pathlib.Path:
  """The folder of real public datasets: $BERTJAX_DATA_DIR, else <repo>/../shared/data."""
  env = os.environ.get("BERTJAX_DATA_DIR")
  return pathlib.Path(env) if env else REPO_ROOT.parent / "shared" / "data"


def cache_dir() -> pathlib.Path:
  """The folder of what bertjax builds once and reuses (vocabularies, character classes):
  $BERTJAX_CACHE_DIR, else ~/.cache/bertjax."""
  env = os.environ.get("BERTJAX_CACHE_DIR")
  return pathlib.Path(env) if env else pathlib.Path.home() / ".cache" / "bertjax"


def write_atomic(path: str, text: str) -> None:
  """Writes `text` to `path` whole or not at all (a temporary file, then a rename), so a
  reader, or a run killed mid-write, never sees half a file."""
  tmp = f"{path}.tmp{os.getpid()}"
  with open(tmp, "w", encoding="utf-8") as f:
    f.write(text)
  os.replace(tmp, path)


def gin_dir() -> pathlib.Path:
  """The folder of bundled gin configs."""
  return REPO_ROOT / "gin"
