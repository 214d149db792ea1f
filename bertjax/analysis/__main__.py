r"""python -m bertjax.analysis attention|heads|probe --model=DIR --out=DIR [options]

  attention  Clark et al.'s per-head statistics over --input (a sentence per line, or two
             separated by a tab): head_statistics.{md,json,png}, heatmaps/ and head_view.html
             of the first line.
  heads      Michel et al.'s iterative head pruning of a GLUE classifier fine-tuned on
             --task: pruning_curve.{md,json,png} (dev score vs. fraction of heads pruned).
  probe      linear probes per layer (and over a scalar mix) for CoNLL-2003 POS, chunk and
             NER tags and NER / chunk spans: probe_by_layer.{md,json,png}.

--model is anything bertjax.open_model reads (a Hugging Face folder, a converted checkpoint,
a fine-tuning or pretraining output folder); its own tokenizer unless --tokenizer is given.
"""
import argparse
import json
import sys

from bertjax import output_paths
from bertjax.analysis import probing, runs


def parser() -> argparse.ArgumentParser:
  top = argparse.ArgumentParser(prog="python -m bertjax.analysis", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
  commands = top.add_subparsers(dest="command", required=True)
  for name in ("attention", "heads", "probe"):
    sub = commands.add_parser(name)
    sub.add_argument("--model", required=True)
    sub.add_argument("--out", required=True)
    sub.add_argument("--overwrite", action="store_true",
                     help="replace an existing --out folder (never one that is read)")
    sub.add_argument("--tokenizer", default=None)
    sub.add_argument("--max_seq_length", type=int, default=128)
    if name == "attention":
      sub.add_argument("--input", required=True)
      sub.add_argument("--max_examples", type=int, default=1000)
    if name == "heads":
      sub.add_argument("--task", required=True, help="a GLUE classification task: sst2, mrpc...")
      sub.add_argument("--max_eval_examples", type=int, default=None)
      sub.add_argument("--importance_examples", type=int, default=256)
      sub.add_argument("--step", type=float, default=0.1)
      sub.add_argument("--max_fraction", type=float, default=0.9)
    if name == "probe":
      sub.add_argument("--tasks", default=",".join(probing.TASKS))
      sub.add_argument("--train_sentences", type=int, default=1000)
      sub.add_argument("--dev_sentences", type=int, default=300)
      sub.add_argument("--steps", type=int, default=300)
  return top


def main(argv=None) -> int:
  args = parser().parse_args(argv)
  common = dict(tokenizer=args.tokenizer, max_seq_length=args.max_seq_length)
  try:
    output_paths.claim_folder(args.out, "--out", args.overwrite,
                              reads=[args.model, args.tokenizer, getattr(args, "input", None)])
    if args.command == "attention":
      summary = runs.attention(args.model, args.input, args.out, max_examples=args.max_examples,
                               **common)
    elif args.command == "heads":
      summary = runs.pruning(args.model, args.task, args.out,
                             max_eval_examples=args.max_eval_examples,
                             importance_examples=args.importance_examples, step=args.step,
                             max_fraction=args.max_fraction, **common)
    else:
      summary = runs.probe(args.model, args.out, tuple(args.tasks.split(",")),
                           train_sentences=args.train_sentences,
                           dev_sentences=args.dev_sentences, steps=args.steps, **common)
  except (ValueError, FileNotFoundError) as e:
    print(f"python -m bertjax.analysis {args.command}: {e}", file=sys.stderr)
    return 1
  brief = {k: v for k, v in summary.items() if k not in ("statistics", "curve", "tasks")}
  print(json.dumps(brief))
  return 0


if __name__ == "__main__":
  sys.exit(main())
