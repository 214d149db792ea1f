"""DistilBERT equals transformers' DistilBertModel / DistilBertForMaskedLM (from_hf / to_hf);
students initialised from a BERT teacher; the student-teacher pair."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import transformers

import bertjax
from bertjax import checkpoints
from bertjax.models import bert, distilbert
from bertjax.models.common import distillation
from bertjax.tools import distilbert_init
from tests.helpers import hf as hf_helpers, parity, pretraining as pretraining_helpers

ODD_CONFIG = dict(vocab_size=101, dim=48, n_layers=3, n_heads=3, hidden_dim=37,
                  max_position_embeddings=40, dropout=0.1, attention_dropout=0.1)

# No token_type_ids: DistilBERT has no segment embeddings.
DISTILBERT = dict(expect={"config.num_layers": 3},
                  **parity.encoder_batches(ODD_CONFIG["vocab_size"], type_vocab_size=0))
CASES = parity.table(
    parity.Case(transformers.DistilBertModel, ODD_CONFIG, ("last_hidden_state", "hidden_states"),
                **DISTILBERT),
    parity.Case(transformers.DistilBertForMaskedLM, ODD_CONFIG, ("logits", "hidden_states"),
                **DISTILBERT),
    *parity.task_cases("DistilBert", dict(ODD_CONFIG, seq_classif_dropout=0.3),
                       parity.encoder_batches(ODD_CONFIG["vocab_size"], type_vocab_size=0),
                       parity.choice_batches(ODD_CONFIG["vocab_size"], type_vocab_size=0),
                       expect_exported={"seq_classif_dropout": 0.3}),
)
test_matches_transformers_and_round_trips = parity.parametrized(CASES)


def bert_teacher(tmp_path, layers: int = 4):
  config = dict(vocab_size=101, hidden_size=48, num_hidden_layers=layers, num_attention_heads=3,
                intermediate_size=37, max_position_embeddings=40)
  model = hf_helpers.reference_model(transformers.BertForMaskedLM, config, std=0.1)
  model.save_pretrained(tmp_path / "teacher")
  return bertjax.from_hf(tmp_path / "teacher")


def test_student_takes_one_layer_out_of_two(tmp_path):
  teacher = bert_teacher(tmp_path)
  student = distilbert.student_params_from_teacher(teacher.params)
  t_query = teacher.params["bert"]["encoder"]["layers"]["attention"]["query"]["kernel"]
  s_query = student["distilbert"]["encoder"]["layers"]["attention"]["query"]["kernel"]
  assert s_query.shape[0] == 2
  np.testing.assert_array_equal(s_query, np.asarray(t_query)[[0, 2]])
  assert distilbert.every_other_layer(12) == [0, 2, 4, 6, 8, 10]
  with pytest.raises(ValueError, match=r"indices into the teacher's 4 layers"):
    distilbert.student_params_from_teacher(teacher.params, layers=[0, 4])


def test_student_with_all_teacher_layers_reproduces_teacher(tmp_path):
  """Folding token type 0 into positions keeps single-segment inputs exact."""
  teacher = bert_teacher(tmp_path)
  student_params = distilbert.student_params_from_teacher(teacher.params, layers=range(4))
  cfg = distilbert.student_config(teacher.config, num_layers=4)
  student = distilbert.DistilBertForMaskedLM(cfg)
  inputs = DISTILBERT["inputs"][0]
  got = jax.jit(lambda p: student.apply({"params": p}, inputs["input_ids"],
                                        inputs["attention_mask"])["logits"])(student_params)
  expected = teacher(input_ids=inputs["input_ids"], attention_mask=inputs["attention_mask"])
  np.testing.assert_allclose(got, expected["logits"], atol=1e-4)


def test_student_teacher_pair_freezes_teacher_gradients(tmp_path):
  teacher = bert_teacher(tmp_path, layers=2)
  cfg = distilbert.student_config(teacher.config)
  pair = distillation.StudentTeacher(distilbert.DistilBertForMaskedLM(cfg), teacher.module)
  params = {"student": distilbert.student_params_from_teacher(teacher.params),
            "teacher": teacher.params}
  inputs = DISTILBERT["inputs"][0]

  def loss(p):
    out = pair.apply({"params": p}, inputs["input_ids"],
                     attention_mask=inputs["attention_mask"], deterministic=True)
    assert {"logits", "teacher_logits", "teacher_last_hidden_state"} <= set(out)
    return jnp.mean((out["logits"] - out["teacher_logits"]) ** 2) + jnp.mean(
        out["teacher_last_hidden_state"] ** 2)

  grads = jax.jit(jax.grad(loss))(params)
  teacher_norm = sum(float(jnp.abs(g).sum()) for g in jax.tree.leaves(grads["teacher"]))
  student_norm = sum(float(jnp.abs(g).sum()) for g in jax.tree.leaves(grads["student"]))
  assert teacher_norm == 0.0 and student_norm > 0.0


def test_parameter_count_equals_reference():
  student = distilbert.DistilBertForMaskedLM(distilbert.distilbert_base())
  assert (hf_helpers.parameter_count(lambda: bert.init_params(student, jax.random.PRNGKey(0)))
          == hf_helpers.reference_parameter_count(transformers.DistilBertForMaskedLM,
                                                  transformers.DistilBertConfig()))


@pytest.mark.slow
def test_distils_under_its_gin_recipe(tmp_path):
  """runs/distilbert_pretrain.gin + models/distilbert_base.gin + objectives/distilbert_distill.gin:
  a 1-layer student initialised from a 2-layer BERT teacher (the checkpoint of
  python -m bertjax.tools.distilbert_init), teacher frozen, triple loss on the embedded corpus."""
  vocab = pretraining_helpers.VOCAB_SIZE
  config = dict(vocab_size=vocab, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                intermediate_size=64, max_position_embeddings=66)
  hf_helpers.reference_model(transformers.BertForMaskedLM, config, std=0.3).save_pretrained(
      tmp_path / "teacher")
  student_cfg, layers = distilbert_init.write_init_checkpoint(str(tmp_path / "teacher"),
                                                         str(tmp_path / "init"))
  assert layers == [0] and student_cfg.num_layers == 1
  tiny = pretraining_helpers.TINY
  records = pretraining_helpers.train(
      tmp_path / "run", ["runs/distilbert_pretrain.gin", "models/distilbert_base.gin",
                         "objectives/distilbert_distill.gin"],
      [f"student/build_model.config_overrides = {{{tiny}, 'num_layers': 1}}",
       f"teacher/build_model.config_overrides = {{{tiny}}}",
       f"DISTILLATION_INIT = '{tmp_path / 'init'}'"])
  # The teacher never moved: its final weights are the checkpoint's.
  final, _ = checkpoints.load_params(str(tmp_path / "run"))
  initial, _ = checkpoints.load_params(str(tmp_path / "init"))
  same = jax.tree.map(np.array_equal, final["teacher"], initial["teacher"])
  assert all(jax.tree.leaves(same))
  ce = pretraining_helpers.early_late(records, "distill_ce_loss")
  cos = pretraining_helpers.early_late(records, "cos_loss")
  agreement = pretraining_helpers.early_late(records, "teacher_agreement")
  assert ce[1] < ce[0] and cos[1] < cos[0], (ce, cos)
  assert agreement[1] > agreement[0] + 0.02, agreement
