"""Model_dirs laid out as `python -m bertjax.main` leaves them, without training."""
import gin
import jax
import flax.linen as nn
import jax.numpy as jnp
import numpy as np

from bertjax import checkpoints, main
from bertjax.checkpoints import record

TINY = ("{'vocab_size': 40, 'hidden_size': 16, 'num_layers': 2, 'num_heads': 2, "
        "'intermediate_size': 32, 'max_position_embeddings': 40}")


def fake_run(model_dir, gin_model: str | tuple[str, ...], steps=(7,),
             features: tuple[str, ...] = (), recorded: bool = True,
             overrides: str = "") -> dict[int, dict]:
  """config.gin + one training checkpoint per step whose state holds `params`, with
  random weights (a different draw per step) instead of trained ones: {step: params}.
  `recorded`: with the model record the trainer writes (model.json); without, a run
  made before the record. `overrides`: more config overrides, e.g. ", 'hidden_dropout': 0.0".
  `gin_model`: models/<name>.gin, or several names (a variant after its sizes);
  `features`: more int inputs of the model's init (heads built only when given them)."""
  names = (gin_model,) if isinstance(gin_model, str) else gin_model
  scopes = ("student/", "teacher/") if names[0].startswith("distil") else ("",)
  gin.clear_config()
  main.parse_gin([f"models/{name}.gin" for name in names],
                 [f"{s}build_model.config_overrides = {TINY[:-1]}{overrides}}}" for s in scopes])
  model = gin.query_parameter("Trainer.model").scoped_configurable_fn()
  ids = jnp.zeros((1, 8), jnp.int32)
  shapes = jax.eval_shape(lambda: nn.unbox(model.init(
      jax.random.key(0), ids, **{name: ids for name in features})["params"]))
  model_dir.mkdir()
  (model_dir / "config.gin").write_text(gin.config_str())
  if recorded:
    record.write(model_dir, record.of_trained(model))
  ckpts = checkpoints.RunCheckpoints(str(model_dir), async_save=False)
  saved = {}
  for step in steps:
    rng = np.random.default_rng(step)
    saved[step] = jax.tree.map(lambda s: rng.normal(size=s.shape).astype(s.dtype), shapes)
    ckpts.save(step, {"params": saved[step], "step": np.int32(step)}, {"batches_consumed": step})
  ckpts.close()
  gin.clear_config()  # the loader must not depend on the run's config being parsed
  return saved
