"""Helpers for parity tests against transformers' PyTorch models."""
import numpy as np
import torch


def redraw_weights(model: torch.nn.Module, seed: int = 0, std: float = 0.2) -> torch.nn.Module:
  """Replaces every floating parameter with N(mean, std) noise (LayerNorm scales around 1),
  so non-linearities, biases and norms all matter in a parity check."""
  gen = torch.Generator().manual_seed(seed)
  with torch.no_grad():
    for name, param in model.named_parameters():
      noise = torch.randn(param.shape, generator=gen) * std
      if name.endswith("LayerNorm.weight") or name.endswith("layer_norm.weight"):
        noise = noise + 1.0
      param.copy_(noise)
  return model.eval()


def padded_batch(vocab_size: int, lengths=(11, 7, 3), type_vocab_size: int = 2, seed: int = 0,
                 first_id: int = 0):
  """input_ids / attention_mask / token_type_ids for sequences of `lengths`, right-padded."""
  rng = np.random.default_rng(seed)
  batch, length = len(lengths), max(lengths)
  input_ids = rng.integers(first_id, vocab_size, (batch, length)).astype(np.int64)
  attention_mask = (np.arange(length)[None] < np.asarray(lengths)[:, None]).astype(np.int64)
  input_ids = np.where(attention_mask == 1, input_ids, 0)
  token_type_ids = (rng.integers(0, type_vocab_size, (batch, length)) * attention_mask).astype(np.int64)
  return {"input_ids": input_ids, "attention_mask": attention_mask, "token_type_ids": token_type_ids}


def torch_outputs(model, inputs: dict, **kwargs) -> dict:
  with torch.no_grad():
    out = model(**{k: torch.as_tensor(v) for k, v in inputs.items()}, **kwargs)
  result = {}
  for key, value in out.items():
    if isinstance(value, torch.Tensor):
      result[key] = value.numpy()
    elif isinstance(value, tuple) and value and isinstance(value[0], torch.Tensor):
      result[key] = np.stack([v.numpy() for v in value])
  return result


def max_abs_diff(ours: dict, theirs: dict, keys) -> dict:
  return {k: float(np.abs(np.asarray(ours[k]) - np.asarray(theirs[k])).max()) for k in keys}
