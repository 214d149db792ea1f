"""XLNet equals transformers' XLNet (both streams, memory, task classes), through from_hf /
to_hf; the paper's [is, a, city, New, York] example; memory equals the concatenated context."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import transformers

from bertjax.models.xlnet import tasks as xlnet_tasks, two_stream
from bertjax.models import bert, xlnet
from tests.helpers import hf as hf_helpers, parity

# Non-default sizes: 3 heads of 16, odd vocab / inner sizes, short memory.
ODD_CONFIG = dict(vocab_size=97, d_model=48, n_layer=3, n_head=3, d_inner=37, mem_len=6,
                  dropout=0.1)
VARIANTS = {
    "default": {},
    "uni_same_length_clamped": dict(attn_type="uni", same_length=True, clamp_len=3),
    "bi_data_reuse": dict(bi_data=True, reuse_len=4, mem_len=5),
}
B, L, P = 4, 9, 3


def plm_batch(seed: int = 0, causal: bool = False) -> dict:
  """A padded batch with a random factorization mask and P targets per row.

  causal: attn_type 'uni' models, where the causal mask is the factorization order
  (transformers fails to combine its 'uni' mask with perm_mask or attention_mask).
  """
  rng = np.random.default_rng(seed)
  batch = hf_helpers.padded_batch(ODD_CONFIG["vocab_size"], (9, 7, 5, 9), type_vocab_size=3,
                                  seed=seed)
  perm_mask = (rng.random((B, L, L)) < 0.4).astype(np.float32)
  target_mapping = np.zeros((B, P, L), np.float32)
  for b in range(B):
    target_mapping[b, np.arange(P), rng.choice(L, P, replace=False)] = 1.0
  if causal:
    return {"input_ids": batch["input_ids"], "token_type_ids": batch["token_type_ids"],
            "target_mapping": target_mapping}
  return dict(batch, perm_mask=perm_mask, target_mapping=target_mapping)


def lm_head_case(variant: str, **kwargs) -> parity.Case:
  """Both streams with perm_mask and target_mapping: segment 1 (no memory), then segment 2
  reading segment 1's memory."""
  causal = VARIANTS[variant].get("attn_type") == "uni"
  return parity.Case(transformers.XLNetLMHeadModel, dict(ODD_CONFIG, **VARIANTS[variant]),
                     ("logits", "mems"), [plm_batch(0, causal), plm_batch(1, causal)],
                     name=f"XLNetLMHeadModel-{variant}", carries_memory=True, **kwargs)


CASES = parity.table(
    lm_head_case("default"),
    lm_head_case("uni_same_length_clamped", export_inputs=[plm_batch(7, causal=True)]),
    lm_head_case("bi_data_reuse"),
    # The content stream only.
    parity.Case(transformers.XLNetModel, ODD_CONFIG, ("last_hidden_state", "mems", "hidden_states"),
                [hf_helpers.padded_batch(ODD_CONFIG["vocab_size"], type_vocab_size=3, seed=3)],
                seed=2),
    # The content stream under every task head, with its memory.
    *parity.task_cases("XLNet", ODD_CONFIG, {"inputs": [hf_helpers.padded_batch(
        ODD_CONFIG["vocab_size"], type_vocab_size=3, seed=5)]}, {"inputs": [
            parity.choice_batch(ODD_CONFIG["vocab_size"], type_vocab_size=3, seed=5)]},
                       kinds=xlnet_tasks.KINDS, extra_outputs=("mems",), seed=4),
)
test_matches_transformers_and_round_trips = parity.parametrized(CASES)


def test_rel_shift_aligns_distance_with_key():
  """After the shift, query i / key j reads the table at distance (mlen + i) - j."""
  qlen, mlen = 4, 3
  distances = two_stream.relative_distances(qlen, mlen, "bi")
  scores = jnp.broadcast_to(jnp.asarray(distances), (qlen, distances.size))
  shifted = np.asarray(two_stream.rel_shift(scores, qlen + mlen))
  i, j = np.arange(qlen)[:, None], np.arange(qlen + mlen)[None, :]
  np.testing.assert_array_equal(shifted, mlen + i - j)


# ----------------------------------------------------------------- the paper's example
WORDS = {"New": 10, "York": 11, "is": 12, "a": 13, "city": 14, "Los": 15}
SENTENCE = ["New", "York", "is", "a", "city"]
ORDER = ["is", "a", "city", "New", "York"]  # factorization order; targets New, York
TARGETS = ["New", "York"]


def paper_example(first_word: str) -> dict:
  ids = np.array([[WORDS[w] for w in [first_word] + SENTENCE[1:]]], np.int32)
  rank = {w: ORDER.index(w) for w in SENTENCE}
  perm_mask = np.zeros((1, 5, 5), np.float32)
  for i, wi in enumerate(SENTENCE):
    for j, wj in enumerate(SENTENCE):
      # Nobody sees a target that comes at or after itself in the order.
      perm_mask[0, i, j] = wj in TARGETS and rank[wj] >= rank[wi]
  target_mapping = np.zeros((1, 2, 5), np.float32)
  target_mapping[0, [0, 1], [SENTENCE.index(t) for t in TARGETS]] = 1.0
  return {"input_ids": ids, "perm_mask": perm_mask, "target_mapping": target_mapping}


def test_paper_example_york_depends_on_new_unlike_bert():
  cfg = xlnet.xlnet_tiny(vocab_size=20, hidden_dropout=0.0)
  model = xlnet.XLNetLMHeadModel(cfg)
  params = jax.jit(lambda k: model.init(k, **paper_example("New"))["params"])(
      jax.random.PRNGKey(0))
  run = lambda ex: np.asarray(model.apply({"params": params}, **ex)["logits"][0])
  new_york, los_york = run(paper_example("New")), run(paper_example("Los"))
  # log p(York | New, is a city) uses the content of "New"...
  assert np.abs(new_york[1] - los_york[1]).max() > 1e-3
  # ...while "New" itself is predicted from its position only (query stream).
  np.testing.assert_allclose(new_york[0], los_york[0], atol=1e-6)

  # BERT-style: both targets are [MASK]ed and predicted independently, so York's
  # prediction cannot depend on what stood at New's position.
  mask_id = 19
  bert_cfg = bert.BertConfig(vocab_size=20, hidden_size=32, num_layers=2, num_heads=2,
                             intermediate_size=64, hidden_dropout=0.0, attention_dropout=0.0)
  mlm = bert.BertForMaskedLM(bert_cfg)
  bert_params = bert.init_params(mlm, jax.random.PRNGKey(1), length=5)

  def bert_york(first_word):
    ids = paper_example(first_word)["input_ids"].copy()
    ids[0, [SENTENCE.index(t) for t in TARGETS]] = mask_id
    return np.asarray(mlm.apply({"params": bert_params}, ids)["logits"][0, 1])

  np.testing.assert_array_equal(bert_york("New"), bert_york("Los"))


# ----------------------------------------------------------------- memory
@pytest.mark.parametrize("two_streams", [False, True])
def test_memory_equals_concatenated_context(two_streams):
  """Segment 2 read with segment 1's memory == the concatenation [1; 2] in which
  segment 1 cannot see segment 2 (content and query streams)."""
  cfg = xlnet.xlnet_tiny(vocab_size=30, hidden_dropout=0.0, mem_len=0)
  model = xlnet.XLNetLMHeadModel(cfg)
  rng = np.random.default_rng(0)
  l1, l2 = 6, 5
  ids = rng.integers(0, 30, (2, l1 + l2)).astype(np.int32)
  types = np.concatenate([np.zeros((2, l1 + 2), np.int32), np.ones((2, l2 - 2), np.int32)], 1)
  perm2 = (rng.random((2, l2, l2)) < 0.5).astype(np.float32)
  tm2 = np.zeros((2, 2, l2), np.float32)
  tm2[:, [0, 1], [1, 3]] = 1.0
  params = jax.jit(lambda k: model.init(k, ids[:, l1:], target_mapping=tm2,
                                       perm_mask=perm2)["params"])(
      jax.random.PRNGKey(0))
  apply = jax.jit(lambda **kw: model.apply({"params": params}, **kw))
  stream = dict(perm_mask=perm2, target_mapping=tm2) if two_streams else {}

  first = apply(input_ids=ids[:, :l1], token_type_ids=types[:, :l1])
  second = apply(input_ids=ids[:, l1:], token_type_ids=types[:, l1:], mems=first["mems"],
                 **stream)

  perm = np.zeros((2, l1 + l2, l1 + l2), np.float32)
  perm[:, :l1, l1:] = 1.0  # the earlier segment never sees the later one
  joint_stream = {}
  if two_streams:  # the later segment keeps its factorization order
    perm[:, l1:, l1:] = perm2
    joint_stream = dict(target_mapping=np.pad(tm2, ((0, 0), (0, 0), (l1, 0))))
  joint = apply(input_ids=ids, token_type_ids=types, perm_mask=perm, **joint_stream)
  got, want = np.asarray(second["logits"]), np.asarray(joint["logits"])
  if not two_streams:
    want = want[:, l1:]
  np.testing.assert_allclose(got, want, atol=1e-5)
  # Memory holds each layer's input: all of both segments (mem_len=0 keeps everything).
  assert second["mems"].shape == (cfg.num_layers, 2, l1 + l2, cfg.hidden_size)


def test_memory_is_truncated_and_not_differentiated():
  cfg = xlnet.xlnet_tiny(vocab_size=30, mem_len=4, reuse_len=3, hidden_dropout=0.0)
  model = xlnet.XLNetModel(cfg)
  ids = jnp.ones((1, 6), jnp.int32)
  params = model.init(jax.random.PRNGKey(0), ids)["params"]
  out = model.apply({"params": params}, ids)
  assert out["mems"].shape == (cfg.num_layers, 1, 3, cfg.hidden_size)  # reuse_len first
  out2 = model.apply({"params": params}, ids, mems=out["mems"])
  assert out2["mems"].shape == (cfg.num_layers, 1, 4, cfg.hidden_size)  # then mem_len
  grad = jax.grad(lambda m: model.apply({"params": params}, ids, mems=m)["mems"].sum())(
      out["mems"])
  assert not np.any(np.asarray(grad))


def test_position_and_segment_ids_are_rejected():
  cfg = xlnet.xlnet_tiny(vocab_size=30)
  with pytest.raises(ValueError, match="position_ids"):
    xlnet.XLNetModel(cfg).init(jax.random.PRNGKey(0), jnp.ones((1, 4), jnp.int32),
                               position_ids=jnp.zeros((1, 4), jnp.int32))
