"""T5 span corruption on the real C4 slice: the TFDS source, a SentencePiece trained on it
with sentinels on top, the registered task's batches, and the gin files that select them."""
import gin
import numpy as np
import pytest

from bertjax import main, paths
from bertjax.train import trainer
from bertjax.data import c4
from bertjax.data import recipes

if not (paths.data_dir() / c4.C4_SUBDIR).is_dir():
  pytest.skip("shared data folder absent", allow_module_level=True)


@pytest.fixture(scope="module")
def vocab(tmp_path_factory):
  return c4.c4_sentencepiece(vocab_size=1000, extra_ids=100,
                             cache_dir=str(tmp_path_factory.mktemp("spm") / "c4-1000"))


def test_source_reads_the_prepared_tfds_c4():
  source = c4.c4_source()
  assert source.num_input_examples("train") == 1000
  assert source.num_input_examples("validation") == 200
  docs = c4.documents("validation", limit=3)
  assert len(docs) == 3 and all(len(d.split()) > 5 for d in docs)
  with pytest.raises(FileNotFoundError, match="dataset_info.json"):
    c4.c4_source("/nonexistent")


def test_vocabulary_has_t5_layout_and_sentinels(vocab):
  assert (vocab.pad_id, vocab.eos_id, vocab.unk_id) == (0, 1, 2)
  assert vocab.extra_ids == 100 and vocab.vocab_size <= 1100
  for text in ("not_entailment", "sst2 sentence: a movie", "3.8"):  # labels survive
    assert vocab.decode(vocab.encode(text)) == text
  again = c4.c4_sentencepiece(vocab_size=1000, extra_ids=100,
                              cache_dir=vocab.sentencepiece_model_file.rsplit("/", 1)[0])
  assert again is vocab  # built once, then read from the cache


def test_span_corruption_batches_on_c4(vocab):
  ds = recipes.get_dataset("t5_span_corruption", sequence_length=64, batch_size=4,
                         source=c4.c4_source(), vocabulary=vocab, seed=0)
  batch = next(ds.as_numpy_iterator())
  assert batch["input_ids"].shape == (4, 64) and batch["labels"].shape[0] == 4
  sentinels = vocab.vocab_size - 100
  assert (batch["input_ids"] >= sentinels).any() and (batch["labels"] >= sentinels).any()
  assert batch["input_ids"].max() < vocab.vocab_size
  assert np.all(batch["label_weights"].sum(1) > 0)


def test_gin_selects_c4_and_builds_the_tiny_run(tmp_path):
  gin.clear_config()
  try:
    main.parse_gin(["runs/t5_c4_tiny_pretrain.gin"], [])
    assert isinstance(recipes.default_source(), type(c4.c4_source()))
    job = trainer.Trainer(model_dir=str(tmp_path))
    assert job.train_task == "t5_span_corruption"
    assert job.model.config.vocab_size == 4096 and job.model.config.num_layers == 2
  finally:
    gin.clear_config()
