"""Every fault test starts and ends with an empty gin config."""
import gin
import pytest


@pytest.fixture(autouse=True)
def _clean_gin():
  gin.clear_config()
  yield
  gin.clear_config()
