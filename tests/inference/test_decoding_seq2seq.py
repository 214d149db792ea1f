"""bertjax.inference.decoding for encoder-decoders: what runs once and what runs every step.

The loops are inspected as jaxprs: the encoder's self-attention ([.., S, S] logits) and
the projection of the encoder output ([.., S, d_model] operand) must not appear inside
the decoding `while` loop, and the cross-attention cache's creating call must cost no
more than those projections (XLA drops its unused decoder pass).
"""
import contextlib
import functools
import logging

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bertjax.inference import decoding, runners, search
from bertjax.models import bart, t5

# Every size distinct, so a shape identifies a tensor: S source tokens, H = d_model.
S, H, BATCH, NEW = 13, 24, 2, 5
MODELS = {
    "t5": lambda: t5.T5ForConditionalGeneration(t5.t5_small(
        vocab_size=101, hidden_size=H, head_dim=7, intermediate_size=37, num_layers=2,
        num_decoder_layers=2, num_heads=3)),
    "bart": lambda: bart.BartForConditionalGeneration(bart.bart_base(
        vocab_size=101, hidden_size=H, encoder_layers=2, decoder_layers=2, encoder_heads=3,
        decoder_heads=3, encoder_ffn_size=37, decoder_ffn_size=37)),
}


@functools.lru_cache(maxsize=None)
def _model(family: str):
  module = MODELS[family]()
  ids = np.random.default_rng(0).integers(3, 101, (BATCH, S)).astype(np.int32)
  mask = np.ones_like(ids)
  mask[1, 9:] = 0
  params = nn.unbox(jax.jit(module.init)(jax.random.PRNGKey(0), ids, ids[:, :3])["params"])
  return module, params, ids, mask


def _equations(jaxpr, in_loop: bool = False):
  """(equation, inside a while loop?) over a jaxpr and every jaxpr nested in it."""
  for eqn in jaxpr.eqns:
    yield eqn, in_loop
    for value in eqn.params.values():
      for sub in value if isinstance(value, (tuple, list)) else (value,):
        sub = getattr(sub, "jaxpr", sub)
        if hasattr(sub, "eqns"):
          yield from _equations(sub, in_loop or eqn.primitive.name == "while")


def _shapes(eqn, variables):
  return [tuple(getattr(v.aval, "shape", ())) for v in variables]


def _search_jaxpr(family: str, **settings):
  module, params, ids, mask = _model(family)
  cfg = decoding.generation_config(max_new_tokens=NEW, decoder_start_token_id=0,
                                   eos_token_id=-1, **settings)
  loop = search.beam_search if cfg.num_beams > 1 else search.greedy_or_sample
  run = functools.partial(loop, runners.runner(module, cfg), cfg)
  return jax.make_jaxpr(run)(params, ids, mask, jax.random.PRNGKey(0)).jaxpr


def _encoder_attention(eqn) -> bool:  # logits / probabilities of the encoder: [.., S, S]
  return eqn.primitive.name == "dot_general" and _shapes(eqn, eqn.outvars)[0][-2:] == (S, S)


def _projects_encoder_output(eqn) -> bool:  # [.., S, H] x kernel: cross-attention keys/values
  return (eqn.primitive.name == "dot_general"
          and any(s[-2:] == (S, H) for s in _shapes(eqn, eqn.invars)))


@pytest.mark.parametrize("family", sorted(MODELS))
@pytest.mark.parametrize("settings", [dict(), dict(num_beams=3)])
def test_encoder_and_cross_projections_run_once_outside_the_loop(family, settings):
  equations = list(_equations(_search_jaxpr(family, **settings)))
  encoder = [in_loop for eqn, in_loop in equations if _encoder_attention(eqn)]
  assert encoder and not any(encoder), "the encoder runs once, before the decoding loop"
  projections = [in_loop for eqn, in_loop in equations if _projects_encoder_output(eqn)]
  assert projections and not any(projections)


@pytest.mark.parametrize("family", sorted(MODELS))
def test_without_the_cross_cache_the_loop_projects_the_encoder_output(family):
  """The inspection above can see the per-step recomputation it rules out."""
  equations = list(_equations(_search_jaxpr(family, cache_cross_attention=False)))
  assert any(in_loop for eqn, in_loop in equations if _projects_encoder_output(eqn))
  assert not any(in_loop for eqn, in_loop in equations if _encoder_attention(eqn))


def test_creating_the_cache_costs_only_the_cross_projections():
  """The creating call runs the decoder on a full-length dummy input; only its
  'cross_cache' is used, so the compiled call keeps just the projections."""
  module, params, ids, mask = _model("t5")
  total = 40
  cfg = decoding.generation_config(max_new_tokens=total - 1, decoder_start_token_id=0)
  runner = runners.runner(module, cfg)
  context, _ = runner.prepare(params, ids, mask, total, cfg)
  init = jax.jit(lambda p, c: runner.init_cache(p, c, BATCH, total))
  flops = init.lower(params, context).compile().cost_analysis()["flops"]
  tokens = jnp.zeros((BATCH, total), jnp.int32)
  full = jax.jit(lambda p, c: module.apply({"params": p}, tokens, c["encoded"],
                                           c["attention_mask"], method="decode")["logits"])
  full_flops = full.lower(params, context).compile().cost_analysis()["flops"]
  layers, kv_width = 2, 3 * 7
  projection_macs = layers * 2 * BATCH * S * H * kv_width  # keys and values
  assert flops <= 1.1 * projection_macs < 0.1 * full_flops
  new_context, cache = init(params, context)
  assert set(new_context) == {"attention_mask", "cross_cache"}  # no encoder output kept
  assert all(not np.any(x) for x in jax.tree.leaves(cache))     # self-attention: empty


@pytest.mark.parametrize("family", sorted(MODELS))
def test_cross_cache_changes_no_token(family):
  """Beam search: the cache is built per example, copied to the beams and reordered
  (greedy / beam ids against transformers: tests/models/test_{t5,bart}.py)."""
  module, params, ids, mask = _model(family)
  kwargs = dict(max_new_tokens=NEW, decoder_start_token_id=0, eos_token_id=-1, num_beams=3,
                num_return_sequences=2)
  both = decoding.generate(module, params, ids, mask, **kwargs)
  self_only = decoding.generate(module, params, ids, mask, cache_cross_attention=False,
                                **kwargs)
  uncached = decoding.generate(module, params, ids, mask, use_cache=False, **kwargs)
  np.testing.assert_array_equal(both, self_only)
  np.testing.assert_array_equal(both, uncached)


@contextlib.contextmanager
def _compiles():
  """Collects jax's "Compiling ..." log messages (jax.log_compiles) in a list."""
  messages = []
  handler = logging.Handler(logging.WARNING)
  handler.emit = lambda record: messages.append(record.getMessage())
  logger = logging.getLogger("jax")
  logger.addHandler(handler)
  try:
    with jax.log_compiles():
      yield messages
  finally:
    logger.removeHandler(handler)


def test_one_compilation_per_shape_and_setting():
  """Decoding compiles once (no per-step or per-output-length programs); a second call
  of the same shapes compiles nothing."""
  module, params, ids, mask = _model("bart")
  kwargs = dict(max_new_tokens=NEW, decoder_start_token_id=2, num_beams=2)
  with _compiles() as first:
    decoding.generate(module, params, ids, mask, **kwargs)
  assert len([m for m in first if "Compiling" in m]) == 1, first
  with _compiles() as second:
    decoding.generate(module, params, ids[::-1], mask[::-1], max_length=NEW - 2,
                      **{k: v for k, v in kwargs.items() if k != "max_new_tokens"})
    decoding.generate(module, params, ids[::-1], mask[::-1], **kwargs)
  assert len([m for m in second if "Compiling" in m]) == 1, second  # the max_length=3 one
