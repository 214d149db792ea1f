"""Every family has tiny / mini / small gin files (gin/models/<family>_<size>.gin), each
saying where the family publishes no such size, and each builds a model that runs on a
batch (abstractly: `jax.eval_shape` of its init, which runs the forward pass, so no weights
are made and nothing compiles; the families' own tests run their modules for real)."""
import inspect

import gin
import jax
import jax.numpy as jnp
import pytest

from bertjax import main, paths

GIN_DIR = paths.gin_dir() / "models"
FAMILIES = ("albert", "bart", "bert", "bigbird_roberta", "deberta", "deberta_v3", "distilbert",
            "electra", "elmo", "gpt2", "linformer", "longformer", "modernbert", "roberta",
            "spanbert", "t5", "t5_v1_1", "xlnet")
SIZES = ("tiny", "mini", "small")
# Sizes the family itself released (by that name); every other size file says it has none.
PUBLISHED = {"bert_tiny", "bert_mini", "bert_small", "deberta_v3_small", "electra_small",
             "gpt2_small", "t5_small", "t5_v1_1_small"}
BATCH, LENGTH = 2, 128  # a CPU run's rows: long enough for BigBird's sparse pattern
# Where each family's LM head puts its token logits (ELECTRA: its generator's; ELMo: the
# forward LM's).
LOGITS = ("logits", "prediction_logits", "generator_logits", "forward_logits")


def size_files() -> list[str]:
  return [f"{family}_{size}" for family in FAMILIES for size in SIZES]


@pytest.fixture(autouse=True)
def _clean_gin():
  gin.clear_config()
  yield
  gin.clear_config()


def test_every_family_has_its_sizes_and_says_which_are_its_own():
  missing = [name for name in size_files() if not (GIN_DIR / f"{name}.gin").is_file()]
  assert not missing
  for name in size_files():
    if name in PUBLISHED:
      continue
    comment = " ".join(line for line in (GIN_DIR / f"{name}.gin").read_text().splitlines()
                       if line.startswith("#"))
    assert "publishes no" in comment, f"{name}.gin does not say its family has no such size"


def _inputs(model, vocab_size: int) -> dict:
  """A batch of the model's own inputs: token ids (ELMo: characters) and, for an
  encoder-decoder, decoder ids."""
  names = inspect.signature(type(model).__call__).parameters
  ids = jnp.ones((BATCH, LENGTH), jnp.int32)
  if "char_ids" in names:
    return {"char_ids": jnp.ones((BATCH, LENGTH, model.config.max_characters_per_word),
                                 jnp.int32)}
  inputs = {"input_ids": ids % vocab_size}
  if "attention_mask" in names:
    inputs["attention_mask"] = ids
  if "decoder_input_ids" in names:
    inputs["decoder_input_ids"] = ids
  return inputs


@pytest.mark.parametrize("name", size_files())
def test_size_builds_and_runs_on_a_batch(name):
  main.parse_gin([f"models/{name}.gin"], [])
  model = gin.query_parameter("Trainer.model").scoped_configurable_fn()
  config = getattr(model, "config", None) or model.student.config
  inputs = _inputs(model, config.vocab_size)

  out, _ = jax.eval_shape(lambda rng: model.init_with_output(rng, **inputs), jax.random.key(0))
  logits = out[next(k for k in LOGITS if k in out)]
  assert logits.shape[:2] == (BATCH, LENGTH) and logits.shape[-1] == config.vocab_size, (
      name, logits.shape)
