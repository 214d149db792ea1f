"""Tiny task files in the official formats and a vocabulary that covers them."""
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
