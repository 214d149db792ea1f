"""The distillation commands of docs/finetune.md end to end at tiny sizes: a teacher fine-tuned by
`bertjax.finetune.run` on a tiny random BERT, the BiLSTM student on labels and on the
teacher's logits with augmentation, the speed comparison; and the bad-input errors."""
import dataclasses
import json
import os
import re
import shlex
import shutil

import gin
import numpy as np
import pytest

from bertjax.checkpoints import save_params
from bertjax.data.word_vocabulary import WordVocabulary
from bertjax.distill import speed, student, student_checkpoint, teacher as teacher_lib
from bertjax.finetune import run as finetune_run
from tests.helpers import docs, sbert as tiny

POSITIVE = ["a man is playing the guitar .", "a woman is playing the piano .",
            "the dog runs on grass .", "a very long sentence with many words here ."]
NEGATIVE = ["a cat .", "the man .", "a dog , a cat .", "many words ."]
TAGS = {"a": "DT", "the": "DT", "man": "NN", "woman": "NN", "guitar": "NN", "piano": "NN",
        "dog": "NN", "cat": "NN", "grass": "NN", "sentence": "NN", "words": "NNS", "is": "VBZ",
        "runs": "VBZ", "playing": "VBG", "on": "IN", "with": "IN", "very": "RB",
        "long": "JJ", "many": "JJ", "here": "RB", ".": ".", ",": ","}
TINY_FLAGS = {
    "bertjax.finetune.run": "--max_steps=2 --batch_size=4 --max_seq_length=16 "
                            "--eval_batch_size=8",
    "bertjax.distill.student": "--max_steps=3 --batch_size=8 --embedding_size=8 --hidden_size=4 "
                               "--mlp_size=4 --max_length=16 --copies=3 --log_every=1 "
                               "--eval_batch_size=8 --teacher_batch_size=8",
    "bertjax.distill.speed": "--repeats=1 --batch_size=8",
}


def _write_data(root):
  sst2 = root / "glue" / "SST-2"
  sst2.mkdir(parents=True)
  rows = [f"{s}\t{label}" for i in range(3) for label, group in ((1, POSITIVE), (0, NEGATIVE))
          for s in group]
  (sst2 / "train.tsv").write_text("sentence\tlabel\n" + "\n".join(rows) + "\n")
  (sst2 / "dev.tsv").write_text("sentence\tlabel\n" + "\n".join(rows[:8]) + "\n")
  conll = root / "conll2003"
  conll.mkdir()
  (conll / "train.txt").write_text("-DOCSTART- -X- -X- O\n\n" + "".join(
      f"{w} {t} O O\n" for w, t in TAGS.items()))


def readme_commands() -> list[list[str]]:
  section = docs.section("Distilling into a BiLSTM (Tang et al., 2019)")
  block = section.split("```bash\n", 1)[1].split("```", 1)[0]
  return [shlex.split(line) for line in block.splitlines() if line.startswith("python -m")]


def _run(command: list[str], places: dict[str, str], data_dir: str) -> dict | None:
  module = command[2]
  argv = [re.sub("|".join(sorted(places, key=len, reverse=True)),
                 lambda m: places[m.group(0)], arg) for arg in command[3:]]
  argv = [module] + argv + [f"--data_dir={data_dir}"] + TINY_FLAGS[module].split()
  if module == "bertjax.finetune.run":
    gin.clear_config()
    finetune_run.FLAGS(argv)
    try:
      finetune_run.main([])
    finally:
      finetune_run.FLAGS.unparse_flags()
      gin.clear_config()
    return None
  return {"bertjax.distill.student": student.main, "bertjax.distill.speed": speed.main}[module](
      argv)


@pytest.fixture(scope="module")
def readme_run(tmp_path_factory):
  """Runs the README's commands at tiny sizes; (folders, each command's report)."""
  root = tmp_path_factory.mktemp("distill")
  _write_data(root / "data")
  places = {name: str(root / name.lower())
            for name in ("CKPT", "TEACHER", "STUDENT", "STUDENT_LABELS")}
  tiny.write_tiny_bert(root / "ckpt", hidden=16)
  reports = [_run(c, places, str(root / "data")) for c in readme_commands()]
  return places, reports


@pytest.mark.slow
def test_readme_commands_train_teacher_students_and_compare_speed(readme_run):
  places, (_, labels_only, distilled, timing) = readme_run
  assert labels_only["targets"] == "labels" and "teacher" not in labels_only
  assert labels_only["transfer_set"] == {"train_examples": 24, "augmented": 0, "total": 24}
  assert distilled["transfer_set"]["train_examples"] == 24
  assert 0 < distilled["transfer_set"]["augmented"] <= 24 * 3
  assert distilled["train_steps"] == 3 and distilled["best_epoch"]["step"] <= 3
  assert 0.0 <= distilled["eval"]["dev"]["accuracy"] <= 1.0
  assert 0.0 <= distilled["eval"]["dev"]["teacher_agreement"] <= 1.0
  assert distilled["teacher"]["params"] > distilled["student_params"]
  assert distilled["student_params"] - distilled["student_params_without_embeddings"] == (
      8 * distilled["vocabulary"])
  rows = [json.loads(line) for line in open(os.path.join(places["STUDENT"], "metrics.jsonl"))]
  assert {"logit_mse", "teacher_agreement"} <= set(rows[0]) and "label_loss" not in rows[0]
  assert json.load(open(os.path.join(places["STUDENT"], "results.json")))["augment"] is True
  # The transfer set on disk: originals with gold labels, copies with the teacher's argmax.
  rows = [json.loads(line) for line in open(os.path.join(places["STUDENT"], "transfer.jsonl"))]
  assert len(rows) == distilled["transfer_set"]["total"]
  assert sum(r["augmented"] for r in rows) == distilled["transfer_set"]["augmented"]
  assert rows[0]["texts"] == [POSITIVE[0]] and not rows[0]["augmented"]
  assert all(r["label"] == int(np.argmax(r["teacher_logits"])) for r in rows if r["augmented"])
  assert all(len(r["teacher_logits"]) == 2 for r in rows)
  # The saved student predicts what was evaluated.
  saved = student_checkpoint.load_student(places["STUDENT"])
  assert saved.config.hidden_size == 4 and saved.metadata["max_length"] == 16
  [timed] = timing["students"]
  assert timed["params"] == distilled["student_params"] and timed["family"] == "bilstm"
  assert timing["teacher"]["params"] == distilled["teacher"]["params"]
  assert timing["sentences"] == 8 and timed["speedup"] > 0
  assert timed["speedup"] == pytest.approx(
      timed["sentences_per_s"] / timing["teacher"]["sentences_per_s"])
  assert timed["params_ratio"] == pytest.approx(timing["teacher"]["params"] / timed["params"])


@pytest.mark.slow
def test_teacher_scores_equal_the_fine_tuned_classifier_on_its_own_features(readme_run):
  places, _ = readme_run
  teacher = teacher_lib.Teacher.from_finetune_run(places["TEACHER"])
  assert teacher.task.name == "sst2" and teacher.max_seq_length == 16
  texts = [(POSITIVE[0],), (NEGATIVE[1],), ("a [MASK] is playing",)]
  arrays = teacher.arrays(texts)
  assert arrays["input_ids"][2, 2] == teacher.tokenizer.token_id("[MASK]")
  direct = teacher.module.apply({"params": teacher.params}, **arrays)["logits"]
  np.testing.assert_allclose(teacher.logits(texts), direct, atol=1e-5)
  # transfer.jsonl holds these logits for its own texts (an augmented copy among them).
  rows = [json.loads(line) for line in open(os.path.join(places["STUDENT"], "transfer.jsonl"))]
  rows = rows[:2] + [next(r for r in rows if r["augmented"])]
  np.testing.assert_allclose(teacher.logits([tuple(r["texts"]) for r in rows]),
                             [r["teacher_logits"] for r in rows], atol=1e-5)


@pytest.mark.slow
def test_a_student_of_another_size_or_vocabulary_fails_naming_what_disagrees(readme_run,
                                                                              tmp_path):
  places, _ = readme_run
  saved = student_checkpoint.load_student(places["STUDENT"])
  bigger = dataclasses.replace(saved.config, hidden_size=6)
  with pytest.raises(ValueError, match="hidden_size: checkpoint 4, expected 6"):
    student_checkpoint.load_student(places["STUDENT"], expect=bigger)
  # Params of another size than the metadata's config.
  resized = tmp_path / "resized"
  shutil.copytree(places["STUDENT"], resized)
  params = dict(saved.params, hidden={"kernel": np.zeros((9, 4), np.float32),
                                      "bias": np.zeros(4, np.float32)})
  save_params(str(resized), params, json.load(open(resized / "metadata.json")))
  with pytest.raises(ValueError, match=r"tensor 'hidden/kernel' has shape \(9, 4\) in params/ "
                                       r"but \(8, 4\)"):
    student_checkpoint.load_student(str(resized))
  # A vocabulary file that is not the student's.
  swapped = tmp_path / "swapped"
  shutil.copytree(places["STUDENT"], swapped)
  words = saved.vocab.words
  WordVocabulary(words[:2] + list(reversed(words[2:]))).save(str(swapped / "words.txt"))
  with pytest.raises(ValueError, match="words.txt is not the vocabulary the student"):
    student_checkpoint.load_student(str(swapped))
  WordVocabulary(words + ["zebra"]).save(str(swapped / "words.txt"))
  with pytest.raises(ValueError, match=r"has \d+ words .* embedding has \d+ rows"):
    student_checkpoint.load_student(str(swapped))
  with pytest.raises(ValueError, match="does not describe a student"):
    student_checkpoint.load_student(places["TEACHER"])


def test_bad_flags_and_teacher_folders_fail_before_anything_loads(tmp_path):
  cases = [(["--task=sst2", "--targets=labels", "--augment"], "--augment needs --targets=teacher"),
           (["--task=sst2", "--targets=teacher"], "--targets=teacher needs --teacher"),
           (["--targets=labels"], "Give --task"),
           (["--task=stsb", "--targets=labels"], "regression task"),
           ([f"--teacher={tmp_path}"], f"--teacher='{tmp_path}' has no config.gin")]
  for flags, message in cases:
    with pytest.raises((ValueError, FileNotFoundError), match=re.escape(message)):
      student.main(["student"] + flags)
  (tmp_path / "config.gin").write_text("Options.max_seq_length = 16\n")
  with pytest.raises(ValueError, match="binds no FinetuneRun.task"):
    teacher_lib.read_run_config(str(tmp_path))
