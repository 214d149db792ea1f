"""bertjax: the BERT family in JAX/Flax, sharded over any device mesh.

Heavy submodules load on first use, so `import bertjax` stays cheap.
"""
import importlib

__version__ = "0.1.0"

_LAZY = {
    "from_hf": ("bertjax.hf.model", "from_hf"),
    "to_hf": ("bertjax.hf.model", "to_hf"),
    "HFModel": ("bertjax.hf.model", "HFModel"),
    "vocab_from_hf": ("bertjax.data.hf_vocabulary", "vocab_from_hf"),
}


def __getattr__(name):
  if name in _LAZY:
    module, attr = _LAZY[name]
    return getattr(importlib.import_module(module), attr)
  raise AttributeError(f"module 'bertjax' has no attribute {name!r}")


__all__ = sorted(_LAZY)
