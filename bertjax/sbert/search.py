r"""Nearest-neighbour search over sentence embeddings with FAISS.

  python -m bertjax.search --checkpoint=DIR --corpus=FILE [--embeddings=FILE.npy] \
      --query="A man is playing a guitar." [--queries=FILE] --k=5 [--index_type=ivf]

encodes the corpus (or reads its embeddings from `python -m bertjax.encode`), builds a
flat inner-product index (exact) or an IVF one (k-means cells, `nprobe` of them
searched: sub-linear, approximate), and prints the top-k corpus lines per query.
With the default cosine metric, corpus and queries are L2-normalised, so inner
product is cosine similarity. `--save_index` / `--index` keep the index on disk.
"""
import dataclasses
import json
import math
import sys
from typing import Optional, Sequence

import numpy as np

METRICS = ("cosine", "ip")
INDEX_TYPES = ("flat", "ivf")


def _faiss():
  import faiss  # Local: faiss is only needed for search, not for importing bertjax.
  return faiss


def _as_matrix(vectors: np.ndarray, name: str) -> np.ndarray:
  vectors = np.ascontiguousarray(vectors, np.float32)
  if vectors.ndim != 2 or not len(vectors):
    raise ValueError(f"{name} must be a non-empty [count, dim] matrix; got shape {vectors.shape}.")
  return vectors


def default_nlist(count: int) -> int:
  """About 4 sqrt(N) cells, but at least 39 training points per cell (FAISS's minimum)."""
  return max(1, min(int(4 * math.sqrt(count)), count // 39))


@dataclasses.dataclass
class SearchIndex:
  """A FAISS index over corpus embeddings; ids are corpus line numbers (0-based)."""
  index: object
  metric: str = "cosine"

  @classmethod
  def build(cls, embeddings: np.ndarray, index_type: str = "flat", metric: str = "cosine",
            nlist: Optional[int] = None, nprobe: int = 8, seed: int = 0) -> "SearchIndex":
    if index_type not in INDEX_TYPES or metric not in METRICS:
      raise ValueError(f"index_type={index_type!r}, metric={metric!r}; expected one of "
                       f"{INDEX_TYPES} and one of {METRICS}.")
    faiss = _faiss()
    vectors = _as_matrix(embeddings, "embeddings").copy()
    if metric == "cosine":
      faiss.normalize_L2(vectors)
    dim = vectors.shape[1]
    if index_type == "flat":
      index = faiss.IndexFlatIP(dim)
    else:
      nlist = nlist or default_nlist(len(vectors))
      if nlist > len(vectors):
        raise ValueError(f"IVF with nlist={nlist} needs at least that many vectors; the corpus "
                         f"has {len(vectors)}. Lower --nlist or use --index_type=flat.")
      index = faiss.IndexIVFFlat(faiss.IndexFlatIP(dim), dim, nlist, faiss.METRIC_INNER_PRODUCT)
      index.cp.seed = seed
      index.train(vectors)
      index.nprobe = min(nprobe, nlist)
    index.add(vectors)
    return cls(index, metric)

  def __len__(self) -> int:
    return self.index.ntotal

  def search(self, queries: np.ndarray, k: int = 10) -> tuple[np.ndarray, np.ndarray]:
    """(scores [Q, k], ids [Q, k]) best first; id -1 where fewer than k were found."""
    queries = _as_matrix(queries, "queries").copy()
    if queries.shape[1] != self.index.d:
      raise ValueError(f"Queries have dimension {queries.shape[1]} but the index holds "
                       f"{self.index.d}-dimensional vectors; encode both with the same model.")
    if self.metric == "cosine":
      _faiss().normalize_L2(queries)
    return self.index.search(queries, min(k, len(self)))

  def save(self, path: str) -> None:
    _faiss().write_index(self.index, path)
    with open(path + ".json", "w") as f:
      json.dump({"metric": self.metric}, f)

  @classmethod
  def load(cls, path: str, nprobe: Optional[int] = None) -> "SearchIndex":
    index = _faiss().read_index(path)
    if nprobe is not None and hasattr(index, "nprobe"):
      index.nprobe = nprobe
    try:
      with open(path + ".json") as f:
        metric = json.load(f)["metric"]
    except FileNotFoundError:
      metric = "cosine"
    return cls(index, metric)


def top_k(index: SearchIndex, query_vectors: np.ndarray, corpus: Sequence[str],
          k: int) -> list[list[tuple[int, float, str]]]:
  """For each query: [(corpus line number, score, line text)...] best first."""
  scores, ids = index.search(query_vectors, k)
  return [[(int(i), float(s), corpus[i] if corpus else "") for s, i in zip(row_s, row_i) if i >= 0]
          for row_s, row_i in zip(scores, ids)]


def main(argv) -> None:
  from absl import flags
  from bertjax.sbert import encode
  FLAGS = flags.FLAGS
  if len(argv) > 1:
    raise ValueError(f"Unexpected arguments {argv[1:]}; see --help.")
  queries = list(FLAGS.query or [])
  if FLAGS.queries:
    queries += encode.read_lines(FLAGS.queries)[0]
  if not queries and not FLAGS.save_index:
    raise ValueError("Nothing to do: give --query / --queries, or --save_index to only build.")
  corpus = encode.read_lines(FLAGS.corpus, "replace")[0] if FLAGS.corpus else []
  encoder = (encode.Encoder.from_checkpoint(FLAGS.checkpoint, pooling=FLAGS.pooling)
             if FLAGS.checkpoint else None)
  if FLAGS.index:
    index = SearchIndex.load(FLAGS.index, FLAGS.nprobe)
  else:
    if FLAGS.embeddings:
      vectors = np.load(FLAGS.embeddings)
    elif encoder is not None and FLAGS.corpus and not corpus:
      raise ValueError(f"--corpus={FLAGS.corpus} has no lines: nothing to search.")
    elif encoder is not None and corpus:
      vectors = encoder.encode(corpus, progress=FLAGS.progress)
    else:
      raise ValueError("Give the corpus as --embeddings=FILE.npy, as --corpus with "
                       "--checkpoint to encode it, or a saved --index.")
    if corpus and len(corpus) != len(vectors):
      raise ValueError(f"--corpus has {len(corpus)} lines but the embeddings have {len(vectors)} "
                       "rows; they must come from the same file.")
    index = SearchIndex.build(vectors, FLAGS.index_type, FLAGS.metric, FLAGS.nlist, FLAGS.nprobe)
  if FLAGS.save_index:
    index.save(FLAGS.save_index)
    print(f"Saved a {len(index)}-vector {FLAGS.index_type} index to {FLAGS.save_index}",
          file=sys.stderr)
  if not queries:
    return
  if encoder is None:
    raise ValueError("--checkpoint is needed to encode the queries.")
  results = top_k(index, encoder.encode(queries), corpus, FLAGS.k)
  for query, hits in zip(queries, results):
    print(json.dumps({"query": query, "neighbours": [
        {"line": i + 1, "score": round(s, 4), "text": t} for i, s, t in hits]},
        ensure_ascii=False))


def _define_flags() -> None:
  from absl import flags
  from bertjax.sbert import model as sbert
  flags.DEFINE_string("checkpoint", None, "Sentence model (encodes queries, and the corpus).")
  flags.DEFINE_string("corpus", None, "Corpus text file, one sentence per line.")
  flags.DEFINE_string("embeddings", None, "Corpus embeddings (.npy from bertjax.encode).")
  flags.DEFINE_string("index", None, "A saved index to query instead of building one.")
  flags.DEFINE_string("save_index", None, "Write the built index here.")
  flags.DEFINE_enum("index_type", "flat", INDEX_TYPES, "flat: exact; ivf: inverted file (fast).")
  flags.DEFINE_enum("metric", "cosine", METRICS, "cosine (normalised inner product) or ip.")
  flags.DEFINE_integer("nlist", None, "IVF cells; default ~4 sqrt(corpus size).")
  flags.DEFINE_integer("nprobe", 8, "IVF cells searched per query.")
  flags.DEFINE_multi_string("query", None, "A query sentence (repeatable).")
  flags.DEFINE_string("queries", None, "File of query sentences, one per line.")
  flags.DEFINE_integer("k", 10, "Neighbours per query.")
  flags.DEFINE_enum("pooling", None, sbert.POOLING_MODES, "Override the model's pooling.")
  flags.DEFINE_bool("progress", True, "Progress bar while encoding the corpus.")


def run() -> None:
  """`bertjax search` / `python -m bertjax.search`."""
  from bertjax import cli  # Local: the library API does not need absl.
  _define_flags()
  cli.run(main, __doc__)


if __name__ == "__main__":
  run()
