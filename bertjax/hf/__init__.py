"""The bridge to Hugging Face checkpoints: `from_hf`, `to_hf`, one adapter per family."""
from bertjax.hf.model import HFModel, from_hf, to_hf

__all__ = ["HFModel", "from_hf", "to_hf"]
