"""DeBERTa v1 / v2 equal transformers' PyTorch models (task classes included) through
from_hf / to_hf; relative positions (log buckets) match the reference; the enhanced mask
decoder works as described."""
import dataclasses
import functools

import flax.linen as nn
import jax
import numpy as np
import pytest
import torch
import transformers
from transformers.models.deberta_v2 import modeling_deberta_v2

import bertjax
from bertjax.models.deberta import disentangled, relative, tasks as deberta_tasks
from bertjax.models import bert, deberta
from tests.helpers import hf as hf_helpers, parity

BASE = dict(vocab_size=101, hidden_size=48, num_hidden_layers=3, num_attention_heads=3,
            intermediate_size=37, max_position_embeddings=40, relative_attention=True)

# Each variant exercises a different path: span clipping (max_relative_positions < L),
# E != H, log buckets, shared keys, the relative-table LayerNorm, one-sided terms,
# absolute positions in the input or not, both MLM head layouts.
VARIANTS = {
    "v1": (1, dict(BASE, pos_att_type="c2p|p2c", max_relative_positions=6, type_vocab_size=3,
                   position_biased_input=True, embedding_size=20)),
    "v1_c2p_new_head": (1, dict(BASE, pos_att_type="c2p", position_biased_input=False,
                                legacy=False, hidden_act="gelu_new")),
    "v3": (2, dict(BASE, pos_att_type="p2c|c2p", position_buckets=4, max_relative_positions=16,
                   share_att_key=True, norm_rel_ebd="layer_norm", position_biased_input=False)),
    "v2_exact": (2, dict(BASE, pos_att_type="c2p|p2c", max_relative_positions=5,
                         type_vocab_size=2, share_att_key=False, position_biased_input=True,
                         legacy=False)),
    "v2_p2c_only": (2, dict(BASE, pos_att_type=["p2c"], position_buckets=6,
                            max_relative_positions=20, position_biased_input=False,
                            embedding_size=24)),
}
# version -> (the transformers encoder, its masked LM)
HF_CLASSES = {1: (transformers.DebertaModel, transformers.DebertaForMaskedLM),
              2: (transformers.DebertaV2Model, transformers.DebertaV2ForMaskedLM)}


def deberta_case(variant: str, masked_lm: bool) -> parity.Case:
  version, config = VARIANTS[variant]
  # Token types only where the config has a token-type table.
  batches = parity.encoder_batches(BASE["vocab_size"],
                                   type_vocab_size=config.get("type_vocab_size", 0))
  return parity.Case(HF_CLASSES[version][masked_lm], config,
                     ("logits" if masked_lm else "last_hidden_state", "hidden_states"),
                     name=f"{variant}-{'ForMaskedLM' if masked_lm else 'Model'}",
                     expect={"config.version": version}, **batches)


def task_cases(variant: str) -> list[parity.Case]:
  """Every task class of the variant's version (v1 has no ...ForMultipleChoice), with a
  non-default ContextPooler and cls_dropout."""
  version, config = VARIANTS[variant]
  types = dict(type_vocab_size=config.get("type_vocab_size", 0))
  return [dataclasses.replace(case, name=f"{variant}-{case.id}") for case in parity.task_cases(
      "DebertaV2" if version == 2 else "Deberta",
      dict(config, pooler_hidden_act="gelu_new", cls_dropout=0.2),
      parity.encoder_batches(BASE["vocab_size"], **types),
      parity.choice_batches(BASE["vocab_size"], **types),
      kinds=deberta_tasks.KINDS if version == 2 else deberta_tasks.KINDS_V1,
      expect={"config.pooler_hidden_act": "gelu_new", "config.classifier_dropout": 0.2},
      expect_exported={"cls_dropout": 0.2})]


CASES = parity.table(*(deberta_case(variant, masked_lm) for variant in sorted(VARIANTS)
                       for masked_lm in (False, True)),
                     *task_cases("v1"), *task_cases("v3"))
test_matches_transformers_and_round_trips = parity.parametrized(CASES)


@pytest.mark.parametrize("bucket_size,max_position", [(4, 16), (6, 20), (256, 512), (32, 128)])
def test_log_buckets_match_reference(bucket_size, max_position):
  rel = relative.relative_positions(300, 300)
  theirs = modeling_deberta_v2.make_log_bucket_position(torch.as_tensor(rel, dtype=torch.long),
                                                        bucket_size, max_position)
  ours = relative.log_bucket_positions(rel, bucket_size, max_position)
  np.testing.assert_array_equal(ours, theirs.numpy().astype(np.int32))
  # Exact inside +-bucket_size/2, then monotone, within the table up to max_position.
  mid = bucket_size // 2
  near = np.abs(rel) < mid
  np.testing.assert_array_equal(ours[near], rel[near])
  assert np.all(np.diff(ours[0]) <= 0)
  assert np.abs(ours[np.abs(rel) < max_position]).max() < bucket_size


def test_unsupported_options_are_named():
  family_config = dict(BASE, model_type="deberta-v2", conv_kernel_size=3)
  from bertjax.models.deberta import hf as hf_deberta
  with pytest.raises(ValueError, match="conv_kernel_size=3"):
    hf_deberta.DebertaV2Family().config_from_hf(family_config)
  with pytest.raises(ValueError, match="pos_att_type"):
    deberta.DebertaConfig(pos_att_type=("c2c",))
  with pytest.raises(ValueError, match="position_biased_input=False"):
    deberta.DebertaConfig(enhanced_mask_decoder=True, position_biased_input=True)


# ----------------------------------------------------------------------------- EMD
TINY = deberta.DebertaConfig(vocab_size=54, hidden_size=32, num_layers=2, num_heads=4,
                             intermediate_size=48, max_position_embeddings=32,
                             position_buckets=4, max_relative_positions=16)


@functools.lru_cache(maxsize=None)
def _emd_model(separate_layer: bool = False):
  model = deberta.DebertaForMaskedLM(TINY.replace(enhanced_mask_decoder=True,
                                                  emd_separate_layer=separate_layer))
  params = jax.jit(lambda k: bert.init_params(model, k))(jax.random.PRNGKey(0))
  return model, params, jax.jit(lambda p, ids, pos: model.apply({"params": p}, ids,
                                                                position_ids=pos)["logits"])


# The released code's EMD (the last encoder layer reused) and the separate-layer option.
EMD_VARIANTS = pytest.mark.parametrize("separate_layer", [False, True],
                                       ids=["shared_last_layer", "separate_layer"])


@EMD_VARIANTS
def test_enhanced_mask_decoder_injects_absolute_positions(separate_layer):
  model, params, run = _emd_model(separate_layer)
  assert set(params) == {"deberta", "mlm_head"} | ({"emd"} if separate_layer else set())
  assert "position_embeddings" in params["deberta"]["embeddings"]
  ids = np.random.default_rng(0).integers(0, TINY.vocab_size, (2, 10)).astype(np.int32)
  pos = np.broadcast_to(np.arange(10), ids.shape).astype(np.int32)
  base = np.asarray(run(params, ids, pos))
  # The encoder sees no absolute positions; the EMD does, so shifting them changes logits...
  assert np.abs(np.asarray(run(params, ids, pos + 3)) - base).max() > 1e-3
  # ...and without the EMD, position_ids have no effect at all.
  plain = deberta.DebertaForMaskedLM(TINY)
  plain_params = {k: v for k, v in params.items() if k != "emd"}
  plain_params["deberta"] = {**params["deberta"], "embeddings": {
      k: v for k, v in params["deberta"]["embeddings"].items() if k != "position_embeddings"}}
  logits = lambda p: plain.apply({"params": plain_params}, ids, position_ids=p)["logits"]
  np.testing.assert_allclose(logits(pos), logits(pos + 3), atol=1e-6)


@EMD_VARIANTS
def test_sharded_4x2_equals_one_device(separate_layer):
  from bertjax.train import partitioning
  model, params, run = _emd_model(separate_layer)
  ids = np.random.default_rng(1).integers(0, TINY.vocab_size, (8, 12)).astype(np.int32)
  pos = np.broadcast_to(np.arange(12), ids.shape).astype(np.int32)
  mesh, rules = partitioning.make_mesh((4, 2)), partitioning.axis_rules()
  boxed = jax.eval_shape(lambda: bert.init_params(model, jax.random.PRNGKey(0), boxed=True))
  shardings = partitioning.shardings_for(boxed, mesh, rules)
  # Heads, MLP and vocab really are split over the 2-way model axis.
  if separate_layer:
    kernel = shardings["emd"]["layer"]["attention"]["query"]["kernel"]
    assert kernel.spec[1] == "model"
  else:  # the EMD's layer is the stack's last: [layers, embed, heads, kv]
    kernel = shardings["deberta"]["encoder"]["stack"]["layers"]["attention"]["query"]["kernel"]
    assert kernel.spec[2] == "model"
  data = partitioning.batch_sharding(mesh, rules)
  sharded = partitioning.jit_sharded(
      lambda p, i, q: model.apply({"params": p}, i, position_ids=q)["logits"], mesh, rules,
      (shardings, data, data), partitioning.replicated(mesh))
  got = sharded(partitioning.place(params, shardings), ids, pos)
  np.testing.assert_allclose(np.asarray(got), np.asarray(run(params, ids, pos)), atol=1e-5)


def _mlm_head_input(model, params, ids, mask, pos):
  """What the model feeds its MLM head (the EMD's output), intercepted at the head's call."""
  seen = []

  def record(next_fn, args, kwargs, context):
    if context.module.name == "mlm_head" and context.method_name == "__call__":
      seen.append(args[0])
    return next_fn(*args, **kwargs)

  @jax.jit
  def run(params):
    with nn.intercept_methods(record):
      model.apply({"params": params}, ids, mask, position_ids=pos)
    return seen[0]

  return np.asarray(run(params))


def _redrawn(params, seed: int = 0):
  """Every parameter + N(0, 0.2): LayerNorm scales and biases far from 1 and 0 too."""
  rng = np.random.default_rng(seed)
  return jax.tree_util.tree_map(
      lambda p: (p + 0.2 * rng.standard_normal(p.shape)).astype(np.float32), params)


def test_emd_is_the_last_encoder_layer_over_the_penultimate_states():
  """microsoft/DeBERTa's EMD: the last layer's own parameters applied twice, keys/values the
  penultimate hidden state H', queries H' + P then the previous pass's output."""
  model, params, _ = _emd_model()
  params = _redrawn(params)
  cfg = model.config
  rng = np.random.default_rng(3)
  ids = rng.integers(0, cfg.vocab_size, (3, 11)).astype(np.int32)
  mask = (np.arange(11)[None] < np.array([[11], [7], [4]])).astype(np.int32)
  pos = (np.arange(11)[None] + np.array([[0], [2], [5]])).astype(np.int32)
  got = _mlm_head_input(model, params, ids, mask, pos)

  @jax.jit
  def by_hand(encoder):
    hidden = deberta.DebertaModel(cfg).apply({"params": encoder}, ids, mask, position_ids=pos,
                                             output_hidden_states=True)["hidden_states"]
    keys = hidden[-2]  # [embeddings, layer 1, ..., layer L]: the last layer's input
    table, index = deberta.DebertaEncoder(cfg).apply(
        {"params": encoder["encoder"]}, ids.shape[1], method="relative_table")
    last = jax.tree_util.tree_map(lambda p: p[-1], encoder["encoder"]["stack"]["layers"])
    layer = disentangled.DisentangledLayer(**deberta.model._layer_kwargs(cfg))
    query = keys + encoder["embeddings"]["position_embeddings"]["embedding"][pos]
    for _ in range(cfg.emd_steps):
      query, _ = layer.apply({"params": last}, keys, deberta.attention_mask_2d(mask, None),
                             table, index, query)
    return query

  np.testing.assert_allclose(got, np.asarray(by_hand(params["deberta"])), atol=1e-5)
  assert np.std(got) > 0.1

  # One pass with zero position embeddings is exactly the encoder's own last layer: the
  # plain model's MLM logits.
  one_step = deberta.DebertaForMaskedLM(cfg.replace(emd_steps=1))
  plain = deberta.DebertaForMaskedLM(cfg.replace(enhanced_mask_decoder=False))
  embeddings = dict(params["deberta"]["embeddings"])
  table = embeddings.pop("position_embeddings")["embedding"]
  plain_params = {**params, "deberta": {**params["deberta"], "embeddings": embeddings}}
  zeroed = {**params, "deberta": {**params["deberta"], "embeddings": {
      **embeddings, "position_embeddings": {"embedding": np.zeros_like(table)}}}}
  logits = jax.jit(lambda module, p: module.apply({"params": p}, ids, mask,
                                                  position_ids=pos)["logits"], static_argnums=0)
  np.testing.assert_allclose(logits(one_step, zeroed), logits(plain, plain_params), atol=1e-5)


def test_emd_adds_no_layer_unless_asked():
  """Parameters: the shared EMD adds only the absolute position table; the separate-layer
  option adds one whole layer more."""
  count = lambda config: hf_helpers.parameter_count(
      lambda: bert.init_params(deberta.DebertaForMaskedLM(config), jax.random.PRNGKey(0)))
  plain = count(TINY)
  positions = TINY.max_position_embeddings * TINY.hidden_size
  one_layer = hf_helpers.parameter_count(lambda: jax.tree_util.tree_map(
      lambda p: p[-1], _emd_model()[1]["deberta"]["encoder"]["stack"]["layers"]))
  assert count(TINY.replace(enhanced_mask_decoder=True)) == plain + positions
  assert count(TINY.replace(enhanced_mask_decoder=True, emd_separate_layer=True)) == (
      plain + positions + one_layer)
  assert one_layer > 0


def test_emd_model_refuses_export_as_hf_masked_lm(tmp_path):
  model, params, _ = _emd_model()
  from bertjax.models.deberta import hf as hf_deberta
  from bertjax.checkpoints.model import HFModel
  exported = HFModel(hf_deberta.DebertaV2Family(), "DebertaV2ForMaskedLM", model.config, model,
                     params)
  with pytest.raises(ValueError, match="no enhanced mask decoder"):
    bertjax.to_hf(exported, tmp_path / "emd")


# ----------------------------------------------------------------------------- gin run
@pytest.mark.slow
def test_tiny_deberta_with_emd_trains_under_its_gin_config(tmp_path):
  import gin
  from bertjax import main
  from bertjax.train import trainer
  from tests.helpers import trainer as tl
  overrides = ("{'vocab_size': %d, 'hidden_size': 32, 'num_heads': 2, 'intermediate_size': 64, "
               "'num_layers': 2, 'max_position_embeddings': 32, 'position_buckets': 4, "
               "'max_relative_positions': 16, 'enhanced_mask_decoder': True}" % tl.VOCAB)
  gin.clear_config()
  try:
    main.parse_gin(["models/deberta_v3_xsmall.gin", "objectives/deberta_mlm_emd.gin",
                    "runs/pretrain.gin"], [
        f"build_model.config_overrides = {overrides}", "Trainer.data_fn = @SyntheticMlmNsp",
        "Trainer.num_train_steps = 50", "Trainer.batch_size = 8", "Trainer.sequence_length = 16",
        "Trainer.log_every = 1", "Trainer.checkpoint_every = 50", "Trainer.show_progress = False",
        "warmup_linear_decay.peak_value = 3e-3", "warmup_linear_decay.warmup_steps = 5"])
    trainer.Trainer(model_dir=str(tmp_path)).run("train")
  finally:
    gin.clear_config()
  records = tl.metrics(tmp_path)
  first = {k: np.mean([r[k] for r in records[:3]]) for k in ("loss", "mlm_accuracy")}
  last = {k: np.mean([r[k] for r in records[-3:]]) for k in ("loss", "mlm_accuracy")}
  assert last["loss"] < 0.85 * first["loss"], (first, last)
  assert last["mlm_accuracy"] > first["mlm_accuracy"] + 0.1, (first, last)


HF_SIZES = {  # our size constructor -> the released checkpoint's config.json values
    "base": (transformers.DebertaConfig, dict(
        vocab_size=50265, relative_attention=True, pos_att_type="c2p|p2c",
        position_biased_input=False, max_relative_positions=-1)),
    "v3_base": (transformers.DebertaV2Config, dict(
        vocab_size=128100, relative_attention=True, position_buckets=256,
        norm_rel_ebd="layer_norm", share_att_key=True, pos_att_type="p2c|c2p",
        position_biased_input=False, max_relative_positions=-1)),
}


@pytest.mark.parametrize("size", sorted(HF_SIZES))
def test_parameter_counts_equal_reference(size):
  cfg = deberta.SIZES[size]()
  masked_lm = deberta.DebertaForMaskedLM(cfg)
  config_cls, kwargs = HF_SIZES[size]
  hf_config = config_cls(hidden_size=cfg.hidden_size, num_hidden_layers=cfg.num_layers,
                         num_attention_heads=cfg.num_heads,
                         intermediate_size=cfg.intermediate_size, **kwargs)
  assert (hf_helpers.parameter_count(lambda: bert.init_params(masked_lm, jax.random.PRNGKey(0)))
          == hf_helpers.reference_parameter_count(HF_CLASSES[cfg.version][1], hf_config))
