"""Activation functions by the names reference configs use (`hidden_act`)."""
import functools
from typing import Callable

import jax
import jax.numpy as jnp

ACTIVATIONS: dict[str, Callable[[jax.Array], jax.Array]] = {
    # BERT's GELU is the exact erf form, not the tanh approximation.
    "gelu": functools.partial(jax.nn.gelu, approximate=False),
    "gelu_new": functools.partial(jax.nn.gelu, approximate=True),
    "gelu_pytorch_tanh": functools.partial(jax.nn.gelu, approximate=True),
    "gelu_fast": functools.partial(jax.nn.gelu, approximate=True),
    "relu": jax.nn.relu,
    "silu": jax.nn.silu,
    "swish": jax.nn.silu,
    "tanh": jnp.tanh,
    "linear": lambda x: x,
}


def get_activation(name: str) -> Callable[[jax.Array], jax.Array]:
  try:
    return ACTIVATIONS[name]
  except KeyError:
    raise ValueError(
        f"Unknown activation {name!r}; expected one of {sorted(ACTIVATIONS)}.") from None
