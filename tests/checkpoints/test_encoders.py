"""Fine-tuning starts from any encoder family's pretraining run (a `python -m
bertjax.main` model_dir): the run's model is rebuilt from its config.gin and the bare
encoder's weights are cut out of its checkpoint."""
import gin
import jax
import flax.linen as nn
import jax.numpy as jnp
import numpy as np
import pytest

from bertjax import checkpoints, main
from bertjax.checkpoints import encoders
from bertjax.models import electra

TINY = ("{'vocab_size': 40, 'hidden_size': 16, 'num_layers': 2, 'num_heads': 2, "
        "'intermediate_size': 32, 'max_position_embeddings': 40}")

# gin model file -> (bare encoder class, where its weights sit in the run's params).
FAMILIES = {
    "bert_tiny": ("BertModel", lambda p: p["bert"]),
    "roberta_base": ("RobertaModel", lambda p: p["roberta"]),
    "albert_base": ("AlbertModel", lambda p: p["albert"]),
    "spanbert_base": ("BertModel", lambda p: p["bert"]),
    "deberta_v3_xsmall": ("DebertaModel", lambda p: p["deberta"]),
    "electra_small": ("ElectraModel", lambda p: electra.discriminator_params(p)["electra"]),
    "distilbert_base": ("DistilBertModel", lambda p: p["student"]["distilbert"]),
}


@pytest.fixture(autouse=True)
def _clean_gin():
  gin.clear_config()
  yield
  gin.clear_config()


def _fake_run(model_dir, gin_model: str) -> dict:
  """A model_dir laid out as bertjax.main leaves it (config.gin + a training checkpoint
  whose state holds `params`), with random weights instead of trained ones."""
  scopes = ("student/", "teacher/") if gin_model.startswith("distil") else ("",)
  main.parse_gin([f"models/{gin_model}.gin"],
                 [f"{s}build_model.config_overrides = {TINY}" for s in scopes])
  model = gin.query_parameter("Trainer.model").scoped_configurable_fn()
  shapes = jax.eval_shape(lambda: nn.unbox(model.init(jax.random.key(0),
                                                      jnp.zeros((1, 8), jnp.int32))["params"]))
  rng = np.random.default_rng(0)
  params = jax.tree.map(lambda s: rng.normal(size=s.shape).astype(s.dtype), shapes)
  model_dir.mkdir()
  (model_dir / "config.gin").write_text(gin.config_str())
  ckpts = checkpoints.RunCheckpoints(str(model_dir), async_save=False)
  ckpts.save(7, {"params": params, "step": np.int32(7)}, {"batches_consumed": 7})
  ckpts.close()
  gin.clear_config()  # the loader must not depend on the run's config being parsed
  return params


@pytest.mark.parametrize("gin_model", sorted(FAMILIES))
def test_every_family_run_dir_gives_its_bare_encoder(tmp_path, gin_model):
  params = _fake_run(tmp_path / "run", gin_model)
  encoder = encoders.load(str(tmp_path / "run"))
  name, where = FAMILIES[gin_model]
  assert type(encoder.module).__name__ == name
  assert "step 7" in encoder.description
  jax.tree.map(np.testing.assert_array_equal, encoder.params, where(params))
  # The weights fit the module: a forward pass runs on them.
  out = encoder.module.apply({"params": encoder.params}, jnp.ones((1, 5), jnp.int32))
  assert out["last_hidden_state"].shape == (1, 5, 16)


def test_run_models_reads_macros_and_puts_the_trained_model_first():
  text = ("M = 'bertjax.models.bert.bert_tiny'\n"
          "teacher/build_model.architecture = 'bertjax.models.bert.BertForMaskedLM'\n"
          "teacher/build_model.config = %M\n"
          "student/build_model.architecture = 'bertjax.models.bert.BertModel'\n"
          "student/build_model.config = %M\n"
          "build_model.dtype = 'bfloat16'\n"
          "Trainer.model = @student_teacher()\n")
  models = encoders.run_models(text)
  assert [(s, type(m).__name__) for s, m in models] == [("student", "BertModel"),
                                                          ("teacher", "BertForMaskedLM")]
  with pytest.raises(ValueError, match="no build_model bindings"):
    encoders.run_models("Trainer.batch_size = 8\n")
  with pytest.raises(ValueError, match="binds no build_model.architecture"):
    encoders.run_models("build_model.dtype = 'bfloat16'\n")


def test_single_token_type_encoders_see_pairs_as_type_zero():
  from bertjax.models import bert, roberta
  arrays = {"input_ids": np.ones((2, 4), np.int32), "token_type_ids": np.array([[0, 0, 1, 1]] * 2)}
  as_roberta = encoders.Encoder(None, None, roberta.RobertaConfig(), "", "roberta")
  assert not as_roberta.fit_inputs(arrays)["token_type_ids"].any()
  assert arrays["token_type_ids"].any()  # the caller's arrays are left alone
  as_bert = encoders.Encoder(None, None, bert.BertConfig(), "", "bert")
  assert as_bert.fit_inputs(arrays) is arrays
