"""Per-word features: ELMo's layers at each word (the sentence read inside <S> ... </S>),
a run's ELMo reopened and checked against its config, and gensim word vectors."""
import jax
import numpy as np
import pytest

from bertjax.checkpoints import params as checkpoint_params
from bertjax.finetune import word_features
from bertjax.models import elmo
from bertjax import characters

SENTENCES = [["EU", "rejects", "German", "call"], ["Peter", "Blackburn"]]
CONFIG_GIN = """build_model.architecture = 'bertjax.models.elmo.ElmoBiLM'
build_model.config = 'bertjax.models.elmo.elmo_tiny'
build_model.config_overrides = {OVERRIDES}
"""


def _run_dir(tmp_path, overrides="{'cell_size': 32}", cell_size=32):
  module = elmo.ElmoBiLM(elmo.elmo_tiny(cell_size=cell_size))
  params = elmo.init_params(module, jax.random.key(0))
  checkpoint_params.save_params(str(tmp_path), params)
  (tmp_path / "config.gin").write_text(CONFIG_GIN.replace("{OVERRIDES}", overrides))
  return params


def test_elmo_states_are_the_models_layers_at_each_word(tmp_path):
  saved = _run_dir(tmp_path)
  module, params = word_features.open_elmo(str(tmp_path))
  assert module.config.cell_size == 32
  jax.tree.map(np.testing.assert_array_equal, params, saved)
  states = word_features.elmo_states(module, params, SENTENCES, batch_size=1)
  assert states.shape == (2, 4, 3, 32) and states.dtype == np.float16
  full = module.apply({"params": params}, characters.batch_ids(SENTENCES, 6),
                      with_logits=False)["hidden_states"]  # [K, B, <S> + 4 + </S>, 2P]
  np.testing.assert_allclose(states[0], np.moveaxis(full[:, 0, 1:5], 0, 1), atol=2e-3)
  np.testing.assert_allclose(states[1, :2], np.moveaxis(full[:, 1, 1:3], 0, 1), atol=2e-3)
  assert not states[1, 2:].any() and np.abs(states[1, :2]).max() > 0


def test_a_checkpoint_of_another_size_fails_naming_the_tensors(tmp_path):
  _run_dir(tmp_path, overrides="{'cell_size': 48}", cell_size=32)
  with pytest.raises(ValueError, match=r"cell_size=48.*lstm/backward_0/bias: the checkpoint "
                                       r".* has \(4, 32\), ElmoConfig expects \(4, 48\)"):
    word_features.open_elmo(str(tmp_path))
  with pytest.raises(FileNotFoundError, match="No config.gin"):
    word_features.open_elmo(str(tmp_path / "missing"))


def test_word_vectors_are_seeded_and_cover_unseen_words_as_documented():
  corpus = [["the", "cat", "sat", "on", "the", "mat"], ["the", "dog", "sat"]] * 20
  w2v = word_features.train_word_vectors(corpus, "word2vec", dim=8, epochs=2)
  again = word_features.train_word_vectors(corpus, "word2vec", dim=8, epochs=2)
  np.testing.assert_array_equal(w2v.vectors, again.vectors)
  fasttext = word_features.train_word_vectors(corpus, "fasttext", dim=8, epochs=2)
  sentences = [["the", "cats"], ["mat"]]
  states = word_features.vector_states(w2v, sentences)
  assert states.shape == (2, 2, 1, 8)
  np.testing.assert_allclose(states[0, 0, 0], w2v["the"], atol=1e-3)
  assert not states[0, 1].any() and not states[1, 1].any()  # unseen word, padding
  assert word_features.vector_states(fasttext, sentences)[0, 1].any()  # char n-grams
  np.testing.assert_allclose(word_features.mean_vectors(w2v, sentences)[0], w2v["the"])
  assert word_features.coverage(w2v, sentences) == pytest.approx(2 / 3)
  with pytest.raises(ValueError, match="Unknown word vector kind 'glove'"):
    word_features.train_word_vectors(corpus, "glove")
