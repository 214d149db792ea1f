"""CoNLL-2003 reading (official sentence counts, bad lines reported) and entity scores:
conlleval's chunk rules, hand-checked scores, and seqeval's micro scores."""
import pytest
import seqeval.metrics
from hypothesis import given, settings, strategies as st

from bertjax import paths
from bertjax.evaluation import conll, readers

TAGS = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC", "B-ORG", "I-ORG"]
sentences = st.lists(st.lists(st.sampled_from(TAGS), min_size=1, max_size=12),
                     min_size=1, max_size=6)


def test_real_files_have_the_official_sentence_counts():
  if not (paths.data_dir() / "conll2003").exists():
    pytest.skip("shared data folder absent")
  log = readers.SkipLog()
  counts = {split: len(conll.read_sentences(conll.path(split), log))
            for split in conll.SPLITS}
  assert counts == {"train": 14041, "dev": 3250, "test": 3453} and not len(log)


def test_bad_lines_skip_their_sentence_with_file_and_line(tmp_path):
  path = tmp_path / "train.txt"
  path.write_text("-DOCSTART- -X- -X- O\n\nEU NNP B-NP B-ORG\nrejects VBZ B-VP O\n\n"
                  "Peter NNP B-NP B-PER\nBlackburn NNP I-NP\n\n"
                  "BRUSSELS NNP B-NP B-FOO\n\nJapan NNP B-NP B-LOC\n")
  log = readers.SkipLog()
  sentences = conll.read_sentences(str(path), log)
  assert [s.words for s in sentences] == [("EU", "rejects"), ("Japan",)]
  assert sentences[1].source == f"{path}:11"
  assert [(e.line, e.path) for e in log.entries] == [(7, str(path)), (9, str(path))]
  assert "found 3" in log.entries[0].reason
  assert "'B-FOO' not in the label set" in log.entries[1].reason


def test_chunks_follow_conlleval_rules():
  assert conll.chunks(["B-PER", "I-PER", "O", "B-LOC"]) == [("PER", 0, 1), ("LOC", 3, 3)]
  # I- after O starts an entity; a type change inside a run splits it.
  assert conll.chunks(["O", "I-PER", "I-LOC", "I-LOC"]) == [("PER", 1, 1), ("LOC", 2, 3)]
  assert conll.chunks(["B-PER", "B-PER"]) == [("PER", 0, 0), ("PER", 1, 1)]
  assert conll.chunks(["S-PER", "B-LOC", "E-LOC"]) == [("PER", 0, 0), ("LOC", 1, 2)]
  # IOB1 runs end at a B- of the same type; I- after E- starts a new entity.
  assert conll.chunks(["I-PER", "I-PER", "B-PER"]) == [("PER", 0, 1), ("PER", 2, 2)]
  assert conll.chunks(["E-PER", "I-PER"]) == [("PER", 0, 0), ("PER", 1, 1)]
  with pytest.raises(ValueError, match="X-PER"):
    conll.chunks(["X-PER"])
  with pytest.raises(ValueError, match="'B'"):
    conll.entity_scores([["B"]], [["O"]])


def test_hand_checked_scores():
  gold = [["B-PER", "I-PER", "O", "B-LOC"], ["B-ORG", "O"]]
  pred = [["B-PER", "I-PER", "O", "B-ORG"], ["B-ORG", "B-MISC"]]
  scores = conll.entity_scores(gold, pred)
  # 2 of 4 predicted correct, 2 of 3 gold found.
  assert scores["precision"] == pytest.approx(0.5)
  assert scores["recall"] == pytest.approx(2 / 3)
  assert scores["f1"] == pytest.approx(4 / 7)
  assert scores["per_type"]["PER"]["f1"] == 1.0 and scores["per_type"]["LOC"]["support"] == 1
  assert scores["per_type"]["MISC"] == {"precision": 0.0, "recall": 0.0, "f1": 0.0, "support": 0}
  with pytest.raises(ValueError, match="Sentence 1: 2 gold tags but 1 predicted"):
    conll.entity_scores(gold, [pred[0], ["O"]])
  with pytest.raises(ValueError, match="2 gold sentences but 1 predicted"):
    conll.entity_scores(gold, pred[:1])


@pytest.mark.filterwarnings("ignore:.*ill-defined")  # seqeval on sentences without entities
@settings(max_examples=80, deadline=None)
@given(sentences, st.randoms(use_true_random=False))
def test_matches_seqeval(gold, rnd):
  pred = [[t if rnd.random() < 0.6 else rnd.choice(TAGS) for t in s] for s in gold]
  ours = conll.entity_scores(gold, pred)
  assert ours["precision"] == pytest.approx(seqeval.metrics.precision_score(gold, pred))
  assert ours["recall"] == pytest.approx(seqeval.metrics.recall_score(gold, pred))
  assert ours["f1"] == pytest.approx(seqeval.metrics.f1_score(gold, pred))
  if ours["per_type"]:
    report = seqeval.metrics.classification_report(gold, pred, output_dict=True, zero_division=0)
    for kind, scores in ours["per_type"].items():
      assert scores["f1"] == pytest.approx(report[kind]["f1-score"])
      assert scores["support"] == report[kind]["support"]
