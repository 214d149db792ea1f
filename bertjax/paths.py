"""Where bertjax finds things on disk: the repository and the shared data folder."""
import os
import pathlib

REPO_ROOT = pathlib.Path(__file__).resolve().parent.parent


def data_dir() -> pathlib.Path:
  """The folder of real public datasets: $BERTJAX_DATA_DIR, else <repo>/../shared/data."""
  env = os.environ.get("BERTJAX_DATA_DIR")
  return pathlib.Path(env) if env else REPO_ROOT.parent / "shared" / "data"


def gin_dir() -> pathlib.Path:
  """The folder of bundled gin configs."""
  return REPO_ROOT / "gin"
