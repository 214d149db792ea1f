r"""Sentence embeddings from any bertjax encoder, fast.

  python -m bertjax.encode --checkpoint DIR --input FILE --output FILE.npy [--pooling mean]

writes one row per input line, in input order. DIR is any folder `bertjax.open_model`
opens (a converted bertjax checkpoint or SBERT export, a Hugging Face /
sentence-transformers folder, a bertjax.main model_dir), whose bare encoder embeds the
sentences; pooling, normalisation and the maximum length default to the directory's
sentence-transformers files (modules.json, 1_Pooling/config.json,
sentence_bert_config.json) when it has them.

Speed comes from never computing on padding. Sentences are tokenized in one batch,
sorted by length and *packed*: several short sentences share one row of `row_length`
tokens, told apart by segment ids (attention never crosses sentences, positions restart
at 0), so each row is almost entirely real tokens. A sentence longer than a row opens
a row of the next power-of-two length, which shorter sentences then fill. Rows are
batched to a fixed token budget, so jit compiles only a handful of [rows, length]
programs, and the next batch is dispatched before the previous one is read back,
overlapping host and device work. `packing=False` gives classic smart batching (one
sentence per row, length-bucketed).

The defaults (32-token rows, 1,024-token batches) were measured best on a CPU
(benchmarks/encode_throughput.py, experiments/sbert/results.md): short rows spend
little on attention across the packed neighbours, and small batches keep a layer's
activations in cache; larger batches were up to 25% slower per sentence.
"""
import bisect
import dataclasses
import logging
import sys
from typing import Any, Iterator, Optional, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from bertjax import output_paths
from bertjax.layers.embeddings import check_length
from bertjax.models.common.config import max_positions
from bertjax.sbert import io as sbert_io
from bertjax.sbert import model as sbert

log = logging.getLogger(__name__)


@dataclasses.dataclass
class EncodeStats:
  """What encoding had to adapt: reported by the CLI and kept on the Encoder."""
  sentences: int = 0
  empty: int = 0
  truncated: int = 0
  tokens: int = 0          # real tokens, after truncation
  padded_tokens: int = 0   # tokens computed, padding included
  programs: int = 0        # distinct [rows, length] shapes run

  def summary(self) -> str:
    efficiency = self.tokens / max(self.padded_tokens, 1)
    return (f"{self.sentences} sentences, {self.empty} empty, {self.truncated} truncated; "
            f"{self.tokens} tokens in {self.padded_tokens} slots ({100 * efficiency:.1f}% real) "
            f"over {self.programs} compiled shapes")


@dataclasses.dataclass(frozen=True)
class Batch:
  """One device batch of packed rows and where each of its sentences came from."""
  input_ids: np.ndarray     # [rows, length]
  segment_ids: np.ndarray   # [rows, length], 1..S per row, 0 = padding
  position_ids: np.ndarray  # [rows, length], restarting at 0 for every sentence
  rows: np.ndarray          # [n] row of each sentence in this batch
  slots: np.ndarray         # [n] its segment number - 1
  sentences: np.ndarray     # [n] its index in the caller's input


def next_power_of_two(n: int) -> int:
  return 1 << max(n - 1, 0).bit_length()


def pack_rows(lengths: Sequence[int], row_length: int,
              max_segments: int) -> list[tuple[int, list[int]]]:
  """Groups sentences into rows: [(row length, [sentence indices])...].

  Best-fit decreasing: longest sentences first, each into the open row whose free
  space fits it most tightly. A sentence longer than `row_length` opens a row of the
  next power-of-two length, whose tail shorter sentences then fill like any other
  row's. max_segments caps sentences per row (the pooling matrix is
  [rows, max_segments, length]); max_segments=1 is plain length-bucketed padding.
  """
  order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
  rows: list[tuple[int, list[int]]] = []
  free: list[tuple[int, int]] = []  # (free tokens, row number) of open rows, sorted
  for i in order:
    n = max(int(lengths[i]), 1)
    if max_segments == 1:
      rows.append((max(next_power_of_two(n), min(row_length, 16)), [i]))
      continue
    at = bisect.bisect_left(free, (n, -1))
    if at == len(free):
      length = row_length if n <= row_length else next_power_of_two(n)
      rows.append((length, [i]))
      room, row = length - n, len(rows) - 1
    else:
      room, row = free.pop(at)
      rows[row][1].append(i)
      room -= n
    if room > 0 and len(rows[row][1]) < max_segments:
      bisect.insort(free, (room, row))
  return rows


def make_batches(token_ids: Sequence[np.ndarray], row_length: int = 32,
                 max_segments: int = 32, batch_tokens: int = 1024,
                 pad_id: int = 0) -> Iterator[Batch]:
  """Packs tokenized sentences into device batches of about `batch_tokens` tokens.

  Rows of one length are cut into batches of batch_tokens // length rows; the last
  batch of each length is padded with empty rows to a power of two, so the number
  of distinct shapes stays small.
  """
  rows = pack_rows([len(t) for t in token_ids], row_length, max_segments)
  by_length: dict[int, list[list[int]]] = {}
  for length, members in rows:
    by_length.setdefault(length, []).append(members)
  for length in sorted(by_length):
    group = by_length[length]
    per_batch = max(batch_tokens // length, 1)
    for start in range(0, len(group), per_batch):
      chunk = group[start:start + per_batch]
      num_rows = per_batch if len(chunk) == per_batch else min(
          next_power_of_two(len(chunk)), per_batch)
      yield fill_rows(token_ids, chunk, num_rows, length, pad_id)


def fill_rows(token_ids, chunk: list[list[int]], num_rows: int, length: int, pad_id: int
              ) -> Batch:
  """`num_rows` rows of `length` holding the sentences of `chunk` (one list per row, indices
  into `token_ids`) end to end; rows past the chunk's are empty (all padding)."""
  ids = np.full((num_rows, length), pad_id, np.int32)
  segments = np.zeros((num_rows, length), np.int32)
  positions = np.zeros((num_rows, length), np.int32)
  rows, slots, sentences = [], [], []
  for r, members in enumerate(chunk):
    offset = 0
    for s, i in enumerate(members):
      n = len(token_ids[i])
      ids[r, offset:offset + n] = token_ids[i]
      segments[r, offset:offset + n] = s + 1
      positions[r, offset:offset + n] = np.arange(n)
      offset += n
      rows.append(r), slots.append(s), sentences.append(i)
  return Batch(ids, segments, positions, np.array(rows), np.array(slots), np.array(sentences))


class Encoder:
  """Sentences -> embeddings with a bertjax encoder and its tokenizer.

    encoder = Encoder.from_checkpoint("converted/all-MiniLM-L6-v2")
    vectors = encoder.encode(["A man is playing a guitar.", ...])  # [N, H] float32
  """

  def __init__(self, module, params, tokenizer: sbert_io.Tokenizer, *, pooling: str = "mean",
               normalize: bool = False, max_seq_length: Optional[int] = None,
               packing: bool = True, row_length: int = 32, max_segments: int = 32,
               batch_tokens: int = 1024):
    # Packed rows restart positions at every sentence, so no token sits past the position
    # table as long as no sentence is longer than it. None: the table's length, <= 512.
    limit = max_positions(getattr(module, "config", None))
    max_seq_length = max_seq_length or min(limit or 512, 512)
    check_length(max_seq_length, limit, "max_seq_length (--max_seq_length)",
                 f"Pass a max_seq_length of at most {limit}")
    self.sentence_encoder = sbert.SentenceEncoder(module, pooling, normalize)
    self.params = {"encoder": params}
    self.tokenizer = tokenizer
    self.max_seq_length = max_seq_length
    self.packing = packing
    self.row_length = row_length
    self.max_segments = max_segments if packing else 1
    self.batch_tokens = batch_tokens
    self.stats = EncodeStats()
    self._shapes: set[tuple[int, ...]] = set()
    self._apply = jax.jit(self._forward, static_argnames="num_segments")

  @classmethod
  def from_checkpoint(cls, directory: str, pooling: Optional[str] = None,
                      normalize: Optional[bool] = None, max_seq_length: Optional[int] = None,
                      **options) -> "Encoder":
    # Local: keep `import bertjax.encode` light.
    from bertjax.checkpoints import encoders, formats
    from bertjax.data import hf_tokenizer
    from bertjax import files
    model = encoders.base_encoder(formats.open_model(directory))
    files.check_tokenizer_files(directory)  # links out of the folder, binary vocabularies
    files.check_tokenizer_files(model.tokenizer_dir)
    settings = sbert_io.read_sentence_config(directory)
    tokenizer = sbert_io.load_tokenizer(model.tokenizer_dir)
    if getattr(model.config, "vocab_size", None):
      ids = max(tokenizer.backend.get_vocab().values()) + 1
      hf_tokenizer.check_fits(ids, str(model.tokenizer_dir),
                              model.config.vocab_size, model.description)
    params = jax.tree.map(jnp.asarray, model.params)  # on the device once, not every batch
    # A default longer than the position table (no sentence-transformers settings) is
    # cut to it; a max_seq_length asked for is refused in __init__ instead.
    limit = max_positions(model.config) or settings.max_seq_length
    if max_seq_length is None and settings.max_seq_length > limit:
      log.warning("max_seq_length %d (%s's sentence settings, or the default) is past the "
                  "encoder's %d positions: using %d.", settings.max_seq_length, directory,
                  limit, limit)
    return cls(model.module, params, tokenizer,
               pooling=pooling or settings.pooling,
               normalize=settings.normalize if normalize is None else normalize,
               max_seq_length=max_seq_length or min(settings.max_seq_length, limit), **options)

  def _forward(self, params, input_ids, segment_ids, position_ids, num_segments):
    out = self.sentence_encoder.apply(
        {"params": params}, input_ids, attention_mask=(segment_ids > 0).astype(jnp.int32),
        position_ids=position_ids, segment_ids=segment_ids, num_segments=num_segments)
    return out["sentence_embedding"]

  def tokenize(self, sentences: Sequence[str]) -> list[np.ndarray]:
    ids, truncated = self.tokenizer.encode(sentences, self.max_seq_length)
    self.stats.sentences += len(sentences)
    self.stats.empty += sum(1 for s in sentences if not s.strip())
    self.stats.truncated += truncated
    return ids

  def encode(self, sentences: Sequence[str], progress: bool = False) -> np.ndarray:
    """[len(sentences), H] float32 embeddings, row i for sentences[i]."""
    if isinstance(sentences, str):
      raise TypeError("encode() takes a list of sentences; wrap a single string in a list.")
    token_ids = self.tokenize(list(sentences))
    out: Optional[np.ndarray] = None
    bar = _progress_bar(len(token_ids), progress)
    pending: Optional[tuple[Batch, Any]] = None
    for batch in make_batches(token_ids, self.row_length, self.max_segments, self.batch_tokens,
                              self.tokenizer.pad_id):
      # A fixed segment count per row keeps one program per row shape.
      result = self._apply(self.params, batch.input_ids, batch.segment_ids, batch.position_ids,
                           num_segments=self.max_segments)  # dispatched, not waited for
      self._account(batch)
      if pending is not None:
        out = self._collect(out, *pending, len(token_ids), bar)
      pending = (batch, result)
    if pending is not None:
      out = self._collect(out, *pending, len(token_ids), bar)
    bar.close()
    self.stats.programs = len(self._shapes)
    if out is None:
      out = np.zeros((0, self.dimension), np.float32)
    return out

  @property
  def dimension(self) -> int:
    shapes = jax.eval_shape(lambda p: self._forward(p, *(jnp.zeros((1, 2), jnp.int32),) * 3, 1),
                            self.params)
    return shapes.shape[-1]

  def _account(self, batch: Batch) -> None:
    self._shapes.add(batch.input_ids.shape)
    self.stats.padded_tokens += batch.input_ids.size
    self.stats.tokens += int((batch.segment_ids > 0).sum())

  @staticmethod
  def _collect(out, batch: Batch, result, total: int, bar) -> np.ndarray:
    vectors = np.asarray(result)[batch.rows, batch.slots]
    if out is None:
      out = np.empty((total, vectors.shape[-1]), np.float32)
    out[batch.sentences] = vectors
    bar.update(len(batch.sentences))
    return out


def _progress_bar(total: int, enabled: bool):
  from tqdm import auto as tqdm  # Local: only the CLI and interactive callers want one.
  return tqdm.tqdm(total=total, unit="sent", disable=not enabled, file=sys.stderr)


def read_lines(path: str, errors: str = "strict") -> tuple[list[str], list[int]]:
  """One sentence per line (\\n or \\r\\n), decoded as UTF-8.

  Returns (lines, 1-based numbers of lines that were not valid UTF-8). With
  errors='strict' such lines raise a ValueError naming them; with 'replace' they are
  decoded with U+FFFD and only reported.
  """
  if errors not in ("strict", "replace"):
    raise ValueError(f"errors={errors!r}; expected 'strict' or 'replace'.")
  with open(path, "rb") as f:
    raw = f.read().split(b"\n")
  if raw and raw[-1] == b"":
    raw.pop()  # a final newline ends the last line; it does not start an empty one
  lines, invalid = [], []
  for number, line in enumerate(raw, start=1):
    line = line[:-1] if line.endswith(b"\r") else line
    try:
      lines.append(line.decode("utf-8"))
    except UnicodeDecodeError as e:
      invalid.append(number)
      lines.append(line.decode("utf-8", errors="replace"))
      if errors == "strict" and len(invalid) == 1:
        first_error = e
  if invalid and errors == "strict":
    shown = ", ".join(map(str, invalid[:10])) + (" ..." if len(invalid) > 10 else "")
    raise ValueError(f"{path}: {len(invalid)} line(s) are not valid UTF-8 (line {shown}; first: "
                     f"{first_error.reason} at byte {first_error.start}). Fix the file or pass "
                     "--errors=replace to encode them with U+FFFD.")
  return lines, invalid


def main(argv) -> None:
  from absl import flags  # Local: the library API does not need absl.
  FLAGS = flags.FLAGS
  if len(argv) > 1:
    raise ValueError(f"Unexpected arguments {argv[1:]}; see --help.")
  try:
    output = output_paths.claim_file(FLAGS.output, "--output", FLAGS.overwrite,
                                     reads=[FLAGS.input, FLAGS.checkpoint])
    lines, invalid = read_lines(FLAGS.input, FLAGS.errors)
    encoder = Encoder.from_checkpoint(
        FLAGS.checkpoint, pooling=FLAGS.pooling, normalize=FLAGS.normalize,
        max_seq_length=FLAGS.max_seq_length, packing=FLAGS.packing, row_length=FLAGS.row_length,
        batch_tokens=FLAGS.batch_tokens)
  except (ValueError, FileNotFoundError) as e:  # bad input: say what, without a traceback
    sys.exit(f"python -m bertjax.encode: {e}")
  vectors = encoder.encode(lines, progress=FLAGS.progress)
  with open(output, "wb") as f:  # .npy format at exactly this path (np.save(name) adds .npy)
    np.save(f, vectors)
  stats = encoder.stats
  print(f"Wrote {vectors.shape} to {output}: {stats.summary()}")
  if invalid:
    print(f"{len(invalid)} line(s) were not valid UTF-8 and were encoded with U+FFFD: "
          f"{invalid[:20]}", file=sys.stderr)
  if stats.empty:
    print(f"{stats.empty} empty line(s) were encoded as empty sentences.", file=sys.stderr)
  if stats.truncated:
    print(f"{stats.truncated} line(s) were longer than {encoder.max_seq_length} tokens and were "
          "truncated.", file=sys.stderr)


def _define_flags() -> None:
  from absl import flags
  flags.DEFINE_string("checkpoint", None, "bertjax checkpoint or HF / sentence-transformers dir.",
                      required=True)
  flags.DEFINE_string("input", None, "Text file, one sentence per line (UTF-8).", required=True)
  flags.DEFINE_string("output", None, "Where to write the [lines, dim] float32 array (.npy "
                      "format, at exactly this path).", required=True)
  flags.DEFINE_bool("overwrite", False, "Replace an existing --output file.")
  flags.DEFINE_enum("pooling", None, sbert.POOLING_MODES,
                    "Pooling; default from the checkpoint's sentence-transformers files, else mean.")
  flags.DEFINE_bool("normalize", None, "L2-normalise embeddings; default from the checkpoint.")
  flags.DEFINE_integer("max_seq_length", None, "Truncate longer sentences (tokens, with specials).")
  flags.DEFINE_bool("packing", True, "Pack short sentences into shared rows (else bucket-pad).")
  flags.DEFINE_integer("row_length", 32, "Packed row length in tokens.")
  flags.DEFINE_integer("batch_tokens", 1024, "Tokens per device batch.")
  flags.DEFINE_enum("errors", "strict", ["strict", "replace"],
                    "Invalid UTF-8 lines: fail naming them, or encode with U+FFFD and report.")
  flags.DEFINE_bool("progress", True, "Show a progress bar on stderr.")


def run() -> None:
  """`bertjax encode` / `python -m bertjax.encode`."""
  from bertjax import cli  # Local: the library API does not need absl.
  _define_flags()
  cli.run(main, __doc__)


if __name__ == "__main__":
  run()
