"""A tiny vocabulary and document source for XLNet row-stream runs, and a data_fn that
crashes its run at a chosen step; gin-configurable, so subprocess runs
(`python -m bertjax.main`-style) can use them too."""
import contextlib
import os
import random
import signal

import gin
import seqio
import tensorflow as tf

from bertjax.data import vocabularies

WORDS = ("the a cat dog sat ran on under mat log big small red blue green and then it was "
         "happy sad day night park tree house bird sang ##s ##ed ##ing . ,").split()
SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
VOCAB_SIZE = len(SPECIALS) + len(WORDS)


@contextlib.contextmanager
def random_b_prob(prob: float):
  """`xlnet_preprocessors.random_b_prob = prob` while datasets are built (0.0: B always
  continues A, so every window is its row stream's own text); clears gin after."""
  with gin.unlock_config():
    gin.bind_parameter("xlnet_preprocessors.random_b_prob", prob)
  try:
    yield
  finally:
    gin.clear_config()


@gin.configurable
def stream_vocabulary(directory: str) -> vocabularies.WordPieceVocabulary:
  """The toy WordPiece vocabulary, written to `directory` once."""
  path = os.path.join(directory, "vocab.txt")
  if not os.path.exists(path):
    os.makedirs(directory, exist_ok=True)
    with open(path, "w") as f:
      f.write("\n".join(SPECIALS + WORDS) + "\n")
  return vocabularies.WordPieceVocabulary(path)


def documents(num_documents: int = 60, seed: int = 0) -> list:
  """Documents of 1-4 random 'sentences' of toy words, one per line."""
  rng = random.Random(seed)
  words = [w for w in WORDS if not w.startswith("##") and w not in ".,"]
  return ["\n".join(" ".join(rng.choices(words, k=rng.randint(3, 9))) + "."
                    for _ in range(rng.randint(1, 4))) for _ in range(num_documents)]


@gin.configurable
def stream_source(num_documents: int = 60) -> seqio.DataSource:
  """`documents()` as the train and validation splits (shuffled by seed when asked)."""
  texts = documents(num_documents)

  def dataset_fn(split, shuffle_files, seed=None):
    del split
    ds = tf.data.Dataset.from_tensor_slices({"text": texts})
    if shuffle_files:
      ds = ds.shuffle(len(texts), seed=seed, reshuffle_each_iteration=True)
    return ds

  return seqio.FunctionDataSource(dataset_fn, splits=["train", "validation"])


@gin.configurable
def task_dataset_killed_at(task_name: str, split: str, *, kill_at_batch: int, **kwargs):
  """`train_inputs.task_dataset`, except that the process SIGKILLs itself when the
  trainer asks for train batch `kill_at_batch`: a crash at a chosen step, for resume
  tests (the batches before it are the task's own)."""
  from bertjax.train import inputs as train_inputs  # pylint: disable=g-import-not-at-top
  dataset = train_inputs.task_dataset(task_name, split, **kwargs)
  if split != "train":
    return dataset

  def batches():
    for index, batch in enumerate(dataset.as_numpy_iterator()):
      if index == kill_at_batch:
        os.kill(os.getpid(), signal.SIGKILL)
      yield batch

  return batches()
