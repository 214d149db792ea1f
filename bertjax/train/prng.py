"""The process-wide random-bit generator behind dropout and sampling (Trainer.prng_impl)."""
import jax

PRNG_IMPLS = ("threefry2x32", "rbg", "unsafe_rbg")


def set_prng_impl(name: str) -> None:
  """Makes `name` JAX's default random-bit generator (see Trainer's `prng_impl`)."""
  if name not in PRNG_IMPLS:
    raise ValueError(f"gin binding Trainer.prng_impl = {name!r}: use one of {PRNG_IMPLS}.")
  jax.config.update("jax_default_prng_impl", name)
