"""Shared by the text-to-text tests: a toy SentencePiece and GLUE files in the official layout."""
import numpy as np

from bertjax.data import vocab_training

WORDS = ("sst2 sentence : positive negative it is a good bad movie film the acting was fine "
         "terrible story rte sentence1 sentence2 entailment not_entailment").split()


def toy_vocabulary(directory: str):
  """A 60-piece SentencePiece (T5's id layout) over sentences of WORDS."""
  lines = [" ".join(np.random.default_rng(i).choice(WORDS, 12)) for i in range(300)]
  return vocab_training.train_sentencepiece(lines, 60, directory)


def write_glue(root, folder: str, split: str, header, rows) -> None:
  """<root>/glue/<folder>/<split>.tsv with a header row, as the GLUE release has."""
  path = root / "glue" / folder
  path.mkdir(parents=True, exist_ok=True)
  (path / f"{split}.tsv").write_text("\n".join(["\t".join(header)] +
                                               ["\t".join(r) for r in rows]) + "\n")
