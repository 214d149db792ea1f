"""SpanBERT: a BERT encoder (BERT weights load unchanged) with the SBO head; MLM + SBO training."""
import dataclasses

import flax.linen as nn
import jax
import numpy as np
import pytest
import torch
import transformers

import bertjax
from bertjax.models import spanbert
from tests.helpers import hf as hf_helpers, pretraining as pretraining_helpers

BERT_CONFIG = dict(vocab_size=101, hidden_size=48, num_hidden_layers=2, num_attention_heads=3,
                   intermediate_size=37, max_position_embeddings=40)


def test_bert_weights_give_bert_outputs_and_sbo_logits(tmp_path):
  """The encoder and MLM head are BERT's: a BertForMaskedLM checkpoint drops in, and the
  reference's logits come out; the SBO head adds `sbo_logits` for the span features."""
  torch.manual_seed(0)
  reference = hf_helpers.redraw_weights(
      transformers.BertForMaskedLM(transformers.BertConfig(**BERT_CONFIG)), std=0.1)
  reference.save_pretrained(tmp_path / "bert")
  bert_model = bertjax.from_hf(tmp_path / "bert")
  cfg = spanbert.SpanBertConfig(**dataclasses.asdict(bert_model.config), sbo_max_positions=4,
                                sbo_position_size=8)
  model = spanbert.SpanBertForPreTraining(cfg)
  inputs = hf_helpers.padded_batch(101)
  sbo = {"sbo_left": np.array([[0, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0]] * 3),
         "sbo_right": np.array([[0, 4, 4, 0, 0, 0, 0, 0, 0, 0, 0]] * 3),
         "sbo_pos": np.array([[0, 1, 2, 0, 0, 0, 0, 0, 0, 0, 0]] * 3)}
  fresh = jax.jit(lambda: model.init(jax.random.PRNGKey(0), inputs["input_ids"], **sbo))()
  params = dict(nn.unbox(fresh["params"]))
  assert set(params) == {"bert", "mlm_head", "sbo_head"}
  params.update(bert=bert_model.params["bert"], mlm_head=bert_model.params["mlm_head"])
  out = jax.jit(lambda p: model.apply({"params": p}, **inputs, **sbo))(params)
  expected = hf_helpers.torch_outputs(reference, inputs)["logits"]
  assert np.abs(np.asarray(out["prediction_logits"]) - expected).max() <= 1e-4
  assert out["sbo_logits"].shape == (3, 11, 101)
  assert params["sbo_head"]["dense1"]["kernel"].shape == (2 * 48 + 8, 48)
  assert params["sbo_head"]["position_embeddings"]["embedding"].shape == (4, 8)
  assert "sbo_logits" not in jax.eval_shape(lambda p: model.apply({"params": p}, **inputs), params)


def test_partial_sbo_features_are_rejected():
  cfg = spanbert.SpanBertConfig(vocab_size=20, hidden_size=16, num_layers=1, num_heads=2,
                                intermediate_size=16, max_position_embeddings=8)
  ids = np.zeros((1, 4), np.int32)
  with pytest.raises(ValueError, match="sbo_left, sbo_right and sbo_pos together"):
    jax.eval_shape(lambda: spanbert.SpanBertForPreTraining(cfg).init(
        jax.random.PRNGKey(0), ids, sbo_left=ids))


@pytest.mark.slow
def test_trains_under_its_gin_recipe(tmp_path):
  """runs/spanbert_pretrain.gin + models/spanbert_base.gin + objectives/spanbert_mlm_sbo.gin:
  span masking from the data layer, loss = MLM + SBO, on the embedded corpus."""
  records = pretraining_helpers.train(
      tmp_path, ["runs/spanbert_pretrain.gin", "models/spanbert_base.gin",
                 "objectives/spanbert_mlm_sbo.gin"],
      [f"build_model.config_overrides = {{{pretraining_helpers.TINY}, "
       "'sbo_position_size': 16}"], steps=60)
  loss = pretraining_helpers.early_late(records, "loss")
  sbo_loss = pretraining_helpers.early_late(records, "sbo_loss")
  sbo_accuracy = pretraining_helpers.early_late(records, "sbo_accuracy")
  assert loss[1] < loss[0] - 0.4 and sbo_loss[1] < sbo_loss[0] - 0.2, (loss, sbo_loss)
  assert sbo_accuracy[1] > sbo_accuracy[0], sbo_accuracy
