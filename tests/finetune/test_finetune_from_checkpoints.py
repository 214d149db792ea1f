"""Fine-tuning from a real bertjax pretraining run and from converted Hugging Face
checkpoints of other families (random weights), end to end through `run.run`."""
import gin
import jax
import numpy as np
import pytest
import transformers

from bertjax import checkpoints, main
from bertjax.checkpoints import encoders
from bertjax.checkpoints import record
from bertjax.checkpoints.formats import open_model
from bertjax.finetune import fitting, loop, run
from bertjax.checkpoints import converted as hf_checkpoint
from bertjax.checkpoints import model as hf_model
from tests.helpers import trainer as trainer_helpers
from tests.helpers import finetune as ftl


@pytest.fixture(autouse=True)
def _clean_gin():
  gin.clear_config()
  yield
  gin.clear_config()


def _options(tmp_path, data_dir):
  return fitting.Options(
      finetune=loop.FinetuneConfig(batch_size=4, eval_batch_size=4), max_steps=2,
      max_seq_length=16, data_dir=data_dir, output_dir=str(tmp_path / "out"))


@pytest.mark.slow
def test_finetunes_from_a_two_step_pretraining_run(tmp_path):
  """The trainer pretrains a tiny BERT for 2 steps; GLUE fine-tuning starts from it."""
  trainer_helpers.configure("Trainer.num_train_steps = 2", "Trainer.checkpoint_every = 2",
                            "Trainer.async_checkpoints = False")
  model_dir = str(tmp_path / "pretrain")
  main.run(model_dir, "train")
  gin.clear_config()
  pretrained, meta = checkpoints.load_params(model_dir)
  assert meta["step"] == 2
  assert record.read(model_dir).architecture == "BertForPreTraining"  # the trainer's record
  vocab = ftl.write_vocab(tmp_path / "vocab")  # 16 words: ids inside the run's 64
  data_dir = ftl.write_rte(tmp_path / "data", train_rows=8, dev_rows=4)
  report = run.run(run.FinetuneRun(task="rte", init_checkpoint=model_dir, tokenizer=vocab),
                   _options(tmp_path, data_dir))
  assert report["encoder"].startswith("bert BertModel (BertForPreTraining, step 2)")
  assert report["train_steps"] == 2 and report["eval"]["dev"]["examples"] == 4
  assert report["best_epoch"]["step"] == 2
  # Fine-tuning changed the pretrained encoder, which it started from.
  tuned, _ = checkpoints.load_params(str(tmp_path / "out"))
  assert set(tuned) == {"encoder", "head"}
  assert record.read(tmp_path / "out").architecture == "BertForSequenceClassification"
  start = encoders.base_encoder(open_model(model_dir)).params
  jax.tree.map(np.testing.assert_array_equal, start, pretrained["bert"])
  assert jax.tree.structure(tuned["encoder"]) == jax.tree.structure(start)
  assert not np.array_equal(tuned["encoder"]["embeddings"]["word_embeddings"]["embedding"],
                            start["embeddings"]["word_embeddings"]["embedding"])


SMALL = dict(vocab_size=len(ftl.WORDS), hidden_size=16, num_hidden_layers=2,
             num_attention_heads=2, intermediate_size=32, max_position_embeddings=40)
HF_MODELS = {
    "roberta": (transformers.RobertaConfig, transformers.RobertaModel, "RobertaModel",
                dict(pad_token_id=0, type_vocab_size=1)),
    "electra": (transformers.ElectraConfig, transformers.ElectraForPreTraining, "ElectraModel",
                dict(embedding_size=8)),
    "deberta_v3": (transformers.DebertaV2Config, transformers.DebertaV2Model, "DebertaModel",
                   dict(relative_attention=True, pos_att_type="p2c|c2p", position_buckets=4,
                        max_relative_positions=16, share_att_key=True,
                        norm_rel_ebd="layer_norm", position_biased_input=False)),
}


@pytest.mark.parametrize("family", [pytest.param("roberta", marks=pytest.mark.slow),
                                    pytest.param("electra", marks=pytest.mark.slow),
                                    "deberta_v3"])
def test_finetunes_from_a_converted_hf_checkpoint(tmp_path, family):
  config_cls, model_cls, encoder_name, extra = HF_MODELS[family]
  hf_dir = str(tmp_path / "hf")
  model_cls(config_cls(**SMALL, **extra)).save_pretrained(hf_dir)
  converted = str(tmp_path / "converted")  # what `python -m bertjax.convert` writes
  hf_checkpoint.save(hf_model.from_hf(hf_dir), converted)
  ftl.write_vocab(converted)  # a WordPiece vocabulary over the same 16 ids
  data_dir = ftl.write_rte(tmp_path / "data", train_rows=8, dev_rows=4, test_rows=4)  # 4 = one batch shape
  report = run.run(run.FinetuneRun(task="rte", init_checkpoint=converted),
                   _options(tmp_path, data_dir))
  assert report["train_steps"] == 2 and np.isfinite(report["history"][-1]["loss"])
  assert 0.0 <= report["eval"]["dev"]["accuracy"] <= 1.0
  assert [p.rsplit("/", 2)[-2:] for p in report["predictions"]] == [["dev", "RTE.tsv"],
                                                                     ["test", "RTE.tsv"]]
  tuned, _ = checkpoints.load_params(str(tmp_path / "out"))
  start = encoders.base_encoder(open_model(converted))
  assert type(start.module).__name__ == encoder_name
  # The family's sequence classifier keeps every encoder weight it reads: all but RoBERTa's
  # pooler (transformers' RobertaForSequenceClassification has none).
  unused = {"roberta": ("pooler",)}.get(family, ())
  assert jax.tree.structure(tuned["encoder"]) == jax.tree.structure(
      {k: v for k, v in start.params.items() if k not in unused})
  assert report["exported_as"] == config_cls.__name__.replace("Config", "ForSequenceClassification")
