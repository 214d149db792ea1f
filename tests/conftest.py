"""Test-wide set-up: 8 fake CPU devices for sharding tests, no hub access, and one XLA
compilation cache for the whole run."""
import atexit
import os
import shutil
import tempfile

from tests import helpers

# Must happen before jax is imported anywhere in the test session (compile fast: see
# tests/helpers/__init__.py).
os.environ.setdefault("XLA_FLAGS", helpers.xla_flags(8))
os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

# Many tests build the same tiny models afresh, and every new closure or module instance is a
# new jit cache entry for JAX, so the same XLA program would be compiled again and again. A
# persistent cache keyed by the program itself turns those into a file read. The process that
# makes the folder (the xdist controller, or pytest alone) removes it at exit; xdist workers
# and the subprocesses tests start inherit it through the environment. A folder the caller
# names in JAX_COMPILATION_CACHE_DIR is used as it is and kept.
if "JAX_COMPILATION_CACHE_DIR" not in os.environ:
  _cache = tempfile.mkdtemp(prefix="bertjax-test-xla-cache-")
  os.environ["JAX_COMPILATION_CACHE_DIR"] = _cache
  atexit.register(shutil.rmtree, _cache, ignore_errors=True)
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0.2")
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES", "0")
