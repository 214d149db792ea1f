"""BART equals transformers' PyTorch BART, through from_hf / to_hf."""
import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import transformers

import bertjax
from bertjax.models import bart
from bertjax.models.bart import hf as bart_hf
from tests.helpers import hf as hf_helpers, parity
from tests.helpers import seq2seq as seq2seq_helpers

ODD_CONFIG = dict(vocab_size=93, d_model=24, encoder_layers=3, decoder_layers=2,
                  encoder_attention_heads=3, decoder_attention_heads=2, encoder_ffn_dim=37,
                  decoder_ffn_dim=29, max_position_embeddings=30, dropout=0.1,
                  attention_dropout=0.1, activation_dropout=0.1)


def bart_case(model_class, outputs, scale_embedding: bool, **kwargs) -> parity.Case:
  return parity.Case(
      model_class, dict(ODD_CONFIG, scale_embedding=scale_embedding),
      outputs + seq2seq_helpers.ENCODER_AND_HIDDEN_STATES,
      name=f"{model_class.__name__}-scale_embedding_{scale_embedding}",
      expect={"config.scale_embedding": scale_embedding},
      **seq2seq_helpers.parity_batches(ODD_CONFIG["vocab_size"]), **kwargs)


CASES = parity.table(*(case for scale in (False, True) for case in (
    # final_logits_bias is a buffer, which redraw_weights would leave at zero.
    bart_case(transformers.BartForConditionalGeneration, ("logits",), scale,
              redraw_buffers=("final_logits_bias",)),
    bart_case(transformers.BartModel, ("last_hidden_state",), scale))))
test_matches_transformers_and_round_trips = parity.parametrized(CASES)


GENERATOR = CASES["BartForConditionalGeneration-scale_embedding_False"]


def test_packed_rows_equal_separate_examples(tmp_path):
  """Packed examples (segment ids, restarting position ids) give their unpacked logits."""
  _, path = parity.save_reference(GENERATOR, tmp_path)
  ours = bertjax.from_hf(path)
  rng = np.random.default_rng(0)
  enc = [rng.integers(3, 90, n) for n in (5, 4)]
  dec = [rng.integers(3, 90, n) for n in (3, 4)]
  apply = jax.jit(ours.module.apply)
  alone = [apply({"params": ours.params}, e[None], d[None])["logits"][0] for e, d in zip(enc, dec)]
  seg = lambda parts: np.concatenate([np.full(len(p), i + 1) for i, p in enumerate(parts)])[None]
  pos = lambda parts: np.concatenate([np.arange(len(p)) for p in parts])[None]
  packed = apply({"params": ours.params}, np.concatenate(enc)[None], np.concatenate(dec)[None],
                 encoder_segment_ids=seg(enc), decoder_segment_ids=seg(dec),
                 encoder_position_ids=pos(enc), decoder_position_ids=pos(dec))["logits"][0]
  np.testing.assert_allclose(packed[:3], alone[0], atol=1e-5)
  np.testing.assert_allclose(packed[3:], alone[1], atol=1e-5)


def test_pre_norm_configs_are_refused(tmp_path):
  _, path = parity.save_reference(CASES["BartModel-scale_embedding_False"], tmp_path)
  config = (path / "config.json").read_text().replace(
      '"model_type"', '"normalize_before": true, "model_type"')
  (path / "config.json").write_text(config)
  with pytest.raises(ValueError, match="post-norm"):
    bertjax.from_hf(path)


@pytest.mark.parametrize("size", sorted(bart.SIZES))
def test_parameter_counts_equal_reference(size):
  cfg = bart.SIZES[size]()
  module = bart.BartForConditionalGeneration(cfg)
  ids = jnp.zeros((1, 4), jnp.int32)
  ours = hf_helpers.parameter_count(lambda: module.init(jax.random.PRNGKey(0), ids, ids)["params"])
  hf_config = transformers.BartConfig(
      d_model=cfg.hidden_size, encoder_layers=cfg.encoder_layers,
      decoder_layers=cfg.decoder_layers, encoder_attention_heads=cfg.encoder_heads,
      decoder_attention_heads=cfg.decoder_heads, encoder_ffn_dim=cfg.encoder_ffn_size,
      decoder_ffn_dim=cfg.decoder_ffn_size)
  # final_logits_bias is a buffer there and a parameter here.
  theirs = hf_helpers.reference_parameter_count(transformers.BartForConditionalGeneration,
                                                hf_config) + cfg.vocab_size
  assert ours == theirs


@pytest.mark.parametrize("prompt_length", [1, 3])
def test_cached_decoding_equals_full_decoding(prompt_length, tmp_path):
  seq2seq_helpers.assert_cached_decoding_equals_full(GENERATOR, tmp_path, prompt_length,
                                                     decoder_length=12)


@pytest.mark.parametrize("settings", [dict(num_beams=1), dict(num_beams=3, length_penalty=0.7)])
def test_generate_equals_reference_generate(settings, tmp_path):
  seq2seq_helpers.assert_generate_equals_reference(GENERATOR, tmp_path, **settings)


@pytest.mark.parametrize("forced, settings", [
    (dict(forced_eos_token_id=None), dict(num_beams=1)),
    (dict(forced_eos_token_id=None), dict(num_beams=3)),
    (dict(forced_eos_token_id=2), dict(num_beams=1)),
    (dict(forced_eos_token_id=2), dict(num_beams=3)),
    (dict(forced_eos_token_id=None, forced_bos_token_id=5), dict(num_beams=3))],
    ids=["eos_null-greedy", "eos_null-beam", "eos_2-greedy", "eos_2-beam", "bos_5-beam"])
def test_generate_forces_tokens_only_where_config_json_says(forced, settings, tmp_path):
  """config.json's forced_eos_token_id (null: nothing forced) and forced_bos_token_id
  reach generate as they reach transformers' from_pretrained: the same ids, greedy and beam."""
  _, path = parity.save_reference(GENERATOR, tmp_path)
  config = {**json.loads((path / "config.json").read_text()), **forced}
  (path / "config.json").write_text(json.dumps(config))
  (path / "generation_config.json").unlink()  # transformers then reads config.json's ids
  torch_model = transformers.BartForConditionalGeneration.from_pretrained(path)
  ours = bertjax.from_hf(path)
  assert ours.config.forced_eos_token_id == forced["forced_eos_token_id"]
  assert ours.config.forced_bos_token_id == forced.get("forced_bos_token_id")
  inputs = seq2seq_helpers.seq2seq_batch(GENERATOR.config["vocab_size"], seed=2)
  # max_length 6: the last step is the one a forced EOS overrides.
  expected, got = seq2seq_helpers.generate_both(torch_model, ours, inputs["input_ids"],
                                                inputs["attention_mask"], max_new_tokens=5,
                                                **settings)
  np.testing.assert_array_equal(got, expected)
  ends_in_eos = (got[:, 1:] == ours.config.eos_token_id).any(axis=1)  # column 0: start (2)
  # Not vacuous: EOS appears in every row only when it is forced.
  assert ends_in_eos.all() == (forced["forced_eos_token_id"] is not None)
  if "forced_bos_token_id" in forced:
    assert (got[:, 1] == forced["forced_bos_token_id"]).all()


def test_config_without_forced_eos_key_forces_eos_like_transformers():
  config = dict(ODD_CONFIG, model_type="bart")
  assert bart_hf.BartFamily().config_from_hf(config).forced_eos_token_id == (
      transformers.BartConfig(**ODD_CONFIG).forced_eos_token_id) == 2
  with pytest.raises(ValueError, match="forced_eos_token_id"):
    bart_hf.BartFamily().config_from_hf({**config, "forced_eos_token_id": [2, 3]})
