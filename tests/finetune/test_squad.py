"""SQuAD training features, sliding windows, span post-processing and the null-score rule."""
import numpy as np
import pytest

from bertjax import paths
from bertjax.evaluation import readers, squad as squad_eval
from bertjax.finetune import squad
from bertjax.finetune.tokenization import WordPiece

VOCAB = paths.data_dir() / "tokenizers" / "bert-base-uncased" / "vocab.txt"
CONTEXT = ("Super Bowl 50 was an American football game. The Denver Broncos defeated the "
           "Carolina Panthers 24-10 at Levi's Stadium in Santa Clara, California.")


@pytest.fixture(scope="module")
def tokenizer():
  if not VOCAB.exists():
    pytest.skip("shared data folder absent")
  return WordPiece.from_path(str(VOCAB))


def test_training_features_skip_unaligned_answers_and_point_impossible_ones_at_cls(tokenizer):
  # As read from a file (tests/evaluation/test_squad.py): q2's answer did not match the
  # context, so it has a gold text but no span; q3 is unanswerable.
  start = CONTEXT.index("Denver Broncos")
  examples = [
      squad_eval.SquadExample("q1", "Who won?", CONTEXT, ("Denver Broncos", "Broncos"),
                              ((start, start + 14), (start + 7, start + 14)), False, 0),
      squad_eval.SquadExample("q2", "Where was it?", CONTEXT, ("Levi's Stadium",), (), False, 0),
      squad_eval.SquadExample("q3", "Who sang?", CONTEXT, (), (), True, 0)]
  # Training drops q2 (no aligned answer); q3 trains towards [CLS].
  arrays = squad.convert_examples(examples, tokenizer, 64, 32, 16, training=True)
  assert sorted(set(arrays["example_index"].tolist())) == [0, 2]
  assert arrays["start_positions"][arrays["example_index"] == 2].tolist() == [0]


def test_windows_and_max_context():
  assert squad._windows(10, 4, 2) == [(0, 4), (2, 4), (4, 4), (6, 4)]
  assert squad._windows(3, 4, 2) == [(0, 3)]
  windows = [(0, 4), (2, 4)]
  # Token 3: 0 tokens right of it in window 0, 1 on each side in window 1.
  assert not squad._max_context(windows, 0, 3) and squad._max_context(windows, 1, 3)
  assert squad._max_context(windows, 0, 1)


def test_long_context_windows_label_the_answer_where_it_fits(tokenizer):
  example = squad_eval.SquadExample("q", "Who won?", CONTEXT, ("Carolina Panthers",),
                               ((CONTEXT.index("Carolina"), CONTEXT.index(" 24-10")),), False, 0)
  arrays = squad.convert_examples([example], tokenizer, max_seq_length=20, doc_stride=5,
                                  max_query_length=8, training=True)
  assert len(arrays["input_ids"]) > 3
  found = 0
  for row in range(len(arrays["input_ids"])):
    s, e = arrays["start_positions"][row], arrays["end_positions"][row]
    ids, types = arrays["input_ids"][row], arrays["token_type_ids"][row]
    assert ids[0] == tokenizer.cls_id and types[arrays["offsets"][row, :, 0] >= 0].all()
    if s:
      found += 1
      offsets = arrays["offsets"][row]
      assert CONTEXT[offsets[s, 0]:offsets[e, 1]] == "Carolina Panthers"
  assert found >= 1
  # Every context token is the max-context token of exactly one window.
  assert arrays["max_context"].sum() == len(tokenizer.encode(CONTEXT))


def _features_for(tokenizer, question="Who won?"):
  example = squad_eval.SquadExample("q1", question, CONTEXT, ("Denver Broncos",), (), False, 0)
  return [example], squad.convert_examples([example], tokenizer, 64, 32, 16, training=False)


def test_postprocess_picks_the_best_valid_span(tokenizer):
  examples, feats = _features_for(tokenizer)
  offsets = feats["offsets"][0]
  pos = lambda word: int(np.flatnonzero(offsets[:, 0] == CONTEXT.index(word))[0])
  start, end = np.zeros((1, 64)), np.zeros((1, 64))
  start[0, pos("Denver")], end[0, pos("Broncos") ] = 5.0, 5.0
  start[0, 1], end[0, 1] = 9.0, 9.0          # question tokens are never an answer
  end[0, pos("Super")] = 7.0                 # ends before every good start: invalid
  start[0, 0], end[0, 0] = 1.0, 2.0          # [CLS]: s_null = 3
  preds = squad.postprocess(examples, feats, start, end, n_best_size=5, max_answer_length=30)
  assert preds["q1"].text == "Denver Broncos" and preds["q1"].score == 10.0
  assert preds["q1"].null_score == 3.0 and preds["q1"].null_margin == -7.0
  # A cap of 1 token forbids the two-token span; the best one-token span is "Super".
  short = squad.postprocess(examples, feats, start, end, n_best_size=5, max_answer_length=1)
  assert (short["q1"].text, short["q1"].score) == ("Super", 7.0)
  # SQuAD 2.0: "" once s_null - s_best exceeds tau.
  answers, margins = squad.final_answers(preds, "2.0", null_threshold=-8.0)
  assert answers == {"q1": ""} and margins == {"q1": -7.0}
  assert squad.final_answers(preds, "2.0", null_threshold=0.0)[0] == {"q1": "Denver Broncos"}
  assert squad.final_answers(preds, "1.1", null_threshold=-8.0)[0] == {"q1": "Denver Broncos"}


def test_oracle_logits_on_real_dev_score_near_100(tokenizer):
  # The file's reading and split: tests/evaluation/test_squad.py.
  examples = squad_eval.read_examples(squad_eval.default_path(), readers.SkipLog())
  _, held_out = squad_eval.split_by_article(examples, 38)
  held_out = held_out[:150]
  # Oracle logits: +10 at the gold start / end of the first answer (training labels).
  feats = squad.convert_examples(held_out, tokenizer, 128, 64, 32, training=True)
  start = np.zeros(feats["input_ids"].shape, np.float32)
  end = np.zeros_like(start)
  rows = np.arange(len(start))
  start[rows, feats["start_positions"]] += 10.0
  end[rows, feats["end_positions"]] += 10.0
  preds = squad.postprocess(held_out, feats, start, end)
  answers, _ = squad.final_answers(preds, "1.1")
  report = squad_eval.evaluate({e.qid: list(e.answer_texts) for e in held_out}, answers)
  assert report["exact"] > 97.0 and report["f1"] > 98.0
