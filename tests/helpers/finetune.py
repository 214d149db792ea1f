"""Tiny task files in the official formats and a vocabulary that covers them."""
import json
import os

WORDS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "man", "sleeps", "person", "dog",
         "cat", "it", "rains", "is", "dry", "."]


def write_vocab(directory) -> str:
  os.makedirs(directory, exist_ok=True)
  path = os.path.join(directory, "vocab.txt")
  with open(path, "w") as f:
    f.write("\n".join(WORDS) + "\n")
  return str(path)


def write_rte(data_dir, train_rows: int = 16, dev_rows: int = 6, test_rows: int = 0) -> str:
  """DATA_DIR/glue/RTE/{train,dev[,test]}.tsv: entailment iff the hypothesis repeats the
  premise's verb (learnable from a handful of rows)."""
  folder = os.path.join(data_dir, "glue", "RTE")
  os.makedirs(folder, exist_ok=True)

  def rows(n, labelled=True):
    out = ["index\tsentence1\tsentence2" + ("\tlabel" if labelled else "")]
    for i in range(n):
      entailed = i % 2 == 1
      hypothesis = "a person sleeps ." if entailed else "it rains ."
      label = ("\tentailment" if entailed else "\tnot_entailment") if labelled else ""
      out.append(f"{i}\ta man sleeps .\t{hypothesis}{label}")
    return "\n".join(out) + "\n"

  for split, n in (("train", train_rows), ("dev", dev_rows)):
    with open(os.path.join(folder, f"{split}.tsv"), "w") as f:
      f.write(rows(n))
  if test_rows:
    with open(os.path.join(folder, "test.tsv"), "w") as f:
      f.write(rows(test_rows, labelled=False))
  return str(data_dir)


# CoNLL-2003 sentences as (word, tag) pairs.
SENTENCES = [[("a", "O"), ("man", "B-PER"), ("sleeps", "O"), (".", "O")],
             [("a", "O"), ("dog", "B-MISC"), ("is", "O"), ("dry", "O")],
             [("it", "O"), ("rains", "O"), ("cat", "B-LOC"), ("person", "I-LOC")]]


def write_conll(folder) -> None:
  """FOLDER/{train,valid,test}.txt in CoNLL-2003's format: SENTENCES x 4, x 1, x 1."""
  os.makedirs(folder, exist_ok=True)
  for name, copies in (("train.txt", 4), ("valid.txt", 1), ("test.txt", 1)):
    lines = ["-DOCSTART- -X- -X- O", ""]
    for sentence in SENTENCES * copies:
      lines += [f"{w} NN I-NP {t}" for w, t in sentence] + [""]
    with open(os.path.join(folder, name), "w") as f:
      f.write("\n".join(lines) + "\n")


SQUAD_CONTEXT = "a man sleeps . it rains . a dog is dry ."


def write_squad11(path, articles: int = 2, questions: int = 4) -> str:
  """A SQuAD v1.1 file over SQUAD_CONTEXT whose every answer is 'a dog'."""
  start = SQUAD_CONTEXT.index("a dog")
  data = [{"title": str(a), "paragraphs": [{"context": SQUAD_CONTEXT, "qas": [
      {"id": f"{a}-{q}", "question": "a man ?", "answers": [{"text": "a dog",
                                                            "answer_start": start}]}
      for q in range(questions)]}]} for a in range(articles)]
  with open(path, "w") as f:
    json.dump({"version": "1.1", "data": data}, f)
  return str(path)


def write_stsb(data_dir, train_rows: int = 8, dev_rows: int = 4) -> str:
  """DATA_DIR/glue/STS-B/{train,dev}.tsv: scores 0..5 by how much of the pair is shared."""
  folder = os.path.join(data_dir, "glue", "STS-B")
  os.makedirs(folder, exist_ok=True)
  header = ("index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2"
            "\tscore")
  pairs = [("a man sleeps .", "a man sleeps .", 5.0), ("a man sleeps .", "a person sleeps .", 3.8),
           ("a dog is dry .", "it rains .", 0.4), ("a cat sleeps .", "a dog sleeps .", 2.5)]
  for split, n in (("train", train_rows), ("dev", dev_rows)):
    rows = [header] + [f"{i}\tmain\tx\t2012\t{i}\tnone\tnone\t{a}\t{b}\t{score}"
                       for i, (a, b, score) in enumerate(pairs[j % 4] for j in range(n))]
    with open(os.path.join(folder, f"{split}.tsv"), "w") as f:
      f.write("\n".join(rows) + "\n")
  return str(data_dir)


# SentencePiece folders as transformers' XLNetTokenizer / DebertaV2Tokenizer load them (no
# real XLNet or DeBERTa-v3 tokenizer ships with the shared data): a small model trained on
# the embedded corpus, its file name and the tokenizer class.
SENTENCEPIECE_FOLDERS = {
    "xlnet": ("spiece.model", {"tokenizer_class": "XLNetTokenizer"},
              ("<cls>", "<sep>", "<mask>", "<eod>", "<eop>")),
    "deberta_v3": ("spm.model", {"tokenizer_class": "DebertaV2Tokenizer", "pad_token": "<pad>",
                                 "unk_token": "<unk>"}, ("[CLS]", "[SEP]", "[MASK]")),
}


def sentencepiece_folder(kind: str, vocab_size: int = 800) -> str:
  """A tokenizer folder of `kind` (SENTENCEPIECE_FOLDERS), trained once and kept in the
  corpus cache (the corpus is deterministic, so the model is too)."""
  import shutil
  import tempfile
  from bertjax.data import corpus, vocab_training
  file_name, config, control_symbols = SENTENCEPIECE_FOLDERS[kind]
  folder = corpus.cache_dir() / f"test_{kind}_sentencepiece_{vocab_size}"
  if not (folder / file_name).is_file():
    tmp = tempfile.mkdtemp(prefix=f"{kind}_sentencepiece_")
    vocab_training.train_sentencepiece(corpus.sentences("train")[:3000], vocab_size, tmp,
                                       control_symbols=control_symbols)
    os.replace(os.path.join(tmp, "spiece.model"), os.path.join(tmp, file_name))
    os.remove(os.path.join(tmp, "spiece.vocab"))
    with open(os.path.join(tmp, "tokenizer_config.json"), "w") as f:
      json.dump(config, f)
    try:
      os.replace(tmp, folder)
    except OSError:  # another test process got there first
      shutil.rmtree(tmp, ignore_errors=True)
  return str(folder)
