"""Fine-tuning starts from any encoder family's pretraining run (a `python -m
bertjax.main` model_dir): the run's model is rebuilt from its config.gin and the bare
encoder's weights are cut out of its checkpoint."""
import gin
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bertjax.checkpoints import encoders
from bertjax.checkpoints.formats import open_model
from bertjax.checkpoints.model import HFModel
from bertjax.models import electra
from tests.helpers import run_dirs

# gin model file -> (bare encoder class, where its weights sit in the run's params).
FAMILIES = {
    "bert_tiny": ("BertModel", lambda p: p["bert"]),
    "roberta_base": ("RobertaModel", lambda p: p["roberta"]),
    "albert_base": ("AlbertModel", lambda p: p["albert"]),
    "spanbert_base": ("BertModel", lambda p: p["bert"]),
    "deberta_v3_xsmall": ("DebertaModel", lambda p: p["deberta"]),
    "electra_small": ("ElectraModel", lambda p: electra.discriminator_params(p)["electra"]),
    "distilbert_base": ("DistilBertModel", lambda p: p["student"]["distilbert"]),
    "modernbert_tiny": ("ModernBertModel", lambda p: p["model"]),
}


@pytest.fixture(autouse=True)
def _clean_gin():
  gin.clear_config()
  yield
  gin.clear_config()


@pytest.mark.parametrize("gin_model", sorted(FAMILIES))
def test_every_family_run_dir_gives_its_bare_encoder(tmp_path, gin_model):
  params = run_dirs.fake_run(tmp_path / "run", gin_model)[7]
  encoder = encoders.base_encoder(open_model(str(tmp_path / "run")))
  name, where = FAMILIES[gin_model]
  assert type(encoder.module).__name__ == name
  assert "step 7" in encoder.description
  jax.tree.map(np.testing.assert_array_equal, encoder.params, where(params))
  # The weights fit the module: a forward pass runs on them.
  out = encoder.module.apply({"params": encoder.params}, jnp.ones((1, 5), jnp.int32))
  assert out["last_hidden_state"].shape == (1, 5, 16)


def test_single_token_type_encoders_see_pairs_as_type_zero():
  from bertjax.models import bert, roberta
  arrays = {"input_ids": np.ones((2, 4), np.int32), "token_type_ids": np.array([[0, 0, 1, 1]] * 2)}
  as_roberta = HFModel(None, "RobertaModel", roberta.RobertaConfig(), None, None, "", "", "")
  assert not as_roberta.fit_inputs(arrays)["token_type_ids"].any()
  assert arrays["token_type_ids"].any()  # the caller's arrays are left alone
  as_bert = HFModel(None, "BertModel", bert.BertConfig(), None, None, "", "", "")
  assert as_bert.fit_inputs(arrays) is arrays
