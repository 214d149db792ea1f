"""bertjax: the BERT family in JAX/Flax, sharded over any device mesh.

- `open_model(path, tokenizer_dir=None)`: a model from any folder on disk (a `python -m
  bertjax.convert` output, a Hugging Face or sentence-transformers folder, a `python -m
  bertjax.main` model_dir) as an `HFModel`: family, architecture, config, module,
  params, `tokenizer_dir` and a one-line `description`; callable like `from_hf`'s models.
  `bertjax.checkpoints.encoders.base_encoder` cuts its bare encoder out for task heads.
- `from_hf(path)` / `to_hf(model, path)`: Hugging Face model folders <-> runnable models.
- `vocab_from_hf(path)`: the seqio vocabulary of a Hugging Face tokenizer folder.
- `pipeline(task, path)`: a model folder as a function of your own text (fill-mask,
  text / token classification, question answering, sentence embeddings, text-to-text).
- `fine_tune(path, kind, train, dev, ...)`: fine-tuning on your own CSV / TSV / JSONL files.

Heavy submodules load on first use, so `import bertjax` stays cheap.
"""
import importlib

from bertjax import quiet as _quiet

__version__ = "0.1.0"
_quiet.native_start()  # a command's start-up without TensorFlow's native lines (bertjax.quiet)

_LAZY = {
    "from_hf": ("bertjax.checkpoints.model", "from_hf"),
    "to_hf": ("bertjax.checkpoints.model", "to_hf"),
    "HFModel": ("bertjax.checkpoints.model", "HFModel"),
    "open_model": ("bertjax.checkpoints.formats", "open_model"),
    "vocab_from_hf": ("bertjax.data.hf_vocabulary", "vocab_from_hf"),
    "pipeline": ("bertjax.predict", "pipeline"),
    "fine_tune": ("bertjax.finetune.own_data", "fine_tune"),
}


def __getattr__(name):
  if name in _LAZY:
    module, attr = _LAZY[name]
    return getattr(importlib.import_module(module), attr)
  raise AttributeError(f"module 'bertjax' has no attribute {name!r}")


__all__ = sorted(_LAZY)
