"""Entity F1 equals seqeval's (conlleval-compatible) on the same tag sequences."""
import pytest
import seqeval.metrics
from hypothesis import given, settings, strategies as st

from bertjax.evaluation import conlleval

TAGS = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC", "B-ORG", "I-ORG"]
sentences = st.lists(st.lists(st.sampled_from(TAGS), min_size=1, max_size=12),
                     min_size=1, max_size=6)


def test_chunks_follow_conlleval_rules():
  assert conlleval.chunks(["B-PER", "I-PER", "O", "B-LOC"]) == [("PER", 0, 1), ("LOC", 3, 3)]
  # I- after O starts an entity; a type change inside a run splits it.
  assert conlleval.chunks(["O", "I-PER", "I-LOC", "I-LOC"]) == [("PER", 1, 1), ("LOC", 2, 3)]
  assert conlleval.chunks(["B-PER", "B-PER"]) == [("PER", 0, 0), ("PER", 1, 1)]
  assert conlleval.chunks(["S-PER", "B-LOC", "E-LOC"]) == [("PER", 0, 0), ("LOC", 1, 2)]
  with pytest.raises(ValueError, match="X-PER"):
    conlleval.chunks(["X-PER"])


def test_hand_checked_scores():
  gold = [["B-PER", "I-PER", "O", "B-LOC"], ["B-ORG", "O"]]
  pred = [["B-PER", "I-PER", "O", "B-ORG"], ["B-ORG", "B-MISC"]]
  scores = conlleval.entity_scores(gold, pred)
  # 2 of 4 predicted correct, 2 of 3 gold found.
  assert scores["precision"] == pytest.approx(0.5)
  assert scores["recall"] == pytest.approx(2 / 3)
  assert scores["f1"] == pytest.approx(4 / 7)
  assert scores["per_type"]["PER"]["f1"] == 1.0 and scores["per_type"]["LOC"]["support"] == 1


@pytest.mark.filterwarnings("ignore:.*ill-defined")  # seqeval on sentences without entities
@settings(max_examples=80, deadline=None)
@given(sentences, st.randoms(use_true_random=False))
def test_matches_seqeval(gold, rnd):
  pred = [[t if rnd.random() < 0.6 else rnd.choice(TAGS) for t in s] for s in gold]
  ours = conlleval.entity_scores(gold, pred)
  assert ours["precision"] == pytest.approx(seqeval.metrics.precision_score(gold, pred))
  assert ours["recall"] == pytest.approx(seqeval.metrics.recall_score(gold, pred))
  assert ours["f1"] == pytest.approx(seqeval.metrics.f1_score(gold, pred))
