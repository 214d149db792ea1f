"""Helpers for parity tests against transformers' PyTorch models."""
import flax.linen as nn
import jax
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


def reference_model(model_class, config: dict, seed: int = 0, std: float = 0.2,
                    buffers=()) -> torch.nn.Module:
  """A transformers `model_class` of `config` (its config_class's keyword arguments), all
  weights redrawn (see redraw_weights), and the named `buffers` drawn from N(0, 1) too."""
  torch.manual_seed(seed)
  model = redraw_weights(model_class(model_class.config_class(**config)), seed, std)
  with torch.no_grad():
    for name in buffers:
      model.get_buffer(name).normal_(generator=torch.Generator().manual_seed(seed))
  return model


def padded_batch(vocab_size: int, lengths=(11, 7, 3), type_vocab_size: int = 2, seed: int = 0,
                 first_id: int = 0, pad_id: int = 0):
  """input_ids / attention_mask / token_type_ids for sequences of `lengths`, right-padded
  with `pad_id`; real ids from `first_id` up; no token_type_ids when type_vocab_size is 0."""
  rng = np.random.default_rng(seed)
  batch, length = len(lengths), max(lengths)
  input_ids = rng.integers(first_id, vocab_size, (batch, length)).astype(np.int64)
  attention_mask = (np.arange(length)[None] < np.asarray(lengths)[:, None]).astype(np.int64)
  inputs = {"input_ids": np.where(attention_mask == 1, input_ids, pad_id),
            "attention_mask": attention_mask}
  if type_vocab_size:
    token_types = rng.integers(0, type_vocab_size, (batch, length)) * attention_mask
    inputs["token_type_ids"] = token_types.astype(np.int64)
  return inputs


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


def parameter_count(init) -> int:
  """How many parameters `init()` (a function returning a parameter tree) makes, from
  shapes only (jax.eval_shape: nothing is computed)."""
  return sum(x.size for x in jax.tree.leaves(nn.unbox(jax.eval_shape(init))))


def reference_parameter_count(model_class, config) -> int:
  """transformers' count for `model_class(config)`, built on the meta device (no memory);
  tied tensors are counted once, as parameters() does."""
  with torch.device("meta"):
    return sum(p.numel() for p in model_class(config).parameters())
