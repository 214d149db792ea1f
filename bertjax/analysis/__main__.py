r"""bertjax analyze attention|heads|probe --model=DIR --out=DIR [options]
(or python -m bertjax.analysis ...)

  attention  Clark et al.'s per-head statistics over --input (a sentence per line, or two
             separated by a tab): head_statistics.{md,json,png}, heatmaps/ and head_view.html
             of the first line.
  heads      Michel et al.'s iterative head pruning of a GLUE classifier fine-tuned on
             --task: pruning_curve.{md,json,png} (dev score vs. fraction of heads pruned).
  probe      linear probes per layer (and over a scalar mix) for CoNLL-2003 POS, chunk and
             NER tags and NER / chunk spans: probe_by_layer.{md,json,png}.

--model is anything bertjax.open_model reads (a Hugging Face folder, a converted checkpoint,
a fine-tuning or pretraining output folder); its own tokenizer unless --tokenizer is given.
`bertjax analyze COMMAND --help` lists each command's flags.
"""
import argparse
import json
import sys

from bertjax import cli, output_paths, quiet
from bertjax.analysis import probing, runs


def parser() -> argparse.ArgumentParser:
  top = argparse.ArgumentParser(prog="python -m bertjax.analysis", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
  commands = top.add_subparsers(dest="command", required=True)
  for name, what in (("attention", "per-head attention statistics, heatmaps, a head view"),
                     ("heads", "head importance and the iterative pruning curve"),
                     ("probe", "linear probes per layer for POS, chunk and NER")):
    sub = commands.add_parser(name, help=what, description=what)
    sub.add_argument("--model", "--checkpoint", dest="model", required=True,
                     help="the model: any folder bertjax.open_model reads")
    sub.add_argument("--out", "--output_dir", dest="out", required=True,
                     help="folder the results, tables and figures go to")
    sub.add_argument("--overwrite", action="store_true",
                     help="replace an existing --out folder (never one that is read)")
    sub.add_argument("--tokenizer", default=None,
                     help="tokenizer folder; default: the model's own")
    sub.add_argument("--max_seq_length", type=int, default=128,
                     help="tokens per input row (default %(default)s)")
    sub.add_argument("--verbosity", "-v", type=int, default=None, help=cli.VERBOSITY_HELP)
    if name == "attention":
      sub.add_argument("--input", required=True,
                       help="text file: a sentence per line, or two separated by a tab")
      sub.add_argument("--max_examples", type=int, default=1000,
                       help="lines of --input to average over (default %(default)s)")
    if name == "heads":
      sub.add_argument("--task", required=True, help="a GLUE classification task: sst2, mrpc...")
      sub.add_argument("--max_eval_examples", type=int, default=None,
                       help="dev examples scored at each pruning step (default: all)")
      sub.add_argument("--importance_examples", type=int, default=256,
                       help="examples that head importance is measured on (default %(default)s)")
      sub.add_argument("--step", type=float, default=0.1,
                       help="fraction of the heads pruned per step (default %(default)s)")
      sub.add_argument("--max_fraction", type=float, default=0.9,
                       help="stop after pruning this fraction of the heads (default %(default)s)")
    if name == "probe":
      sub.add_argument("--tasks", default=",".join(probing.TASKS),
                       help="comma-separated probing tasks (default: all of %(default)s)")
      sub.add_argument("--train_sentences", type=int, default=1000,
                       help="CoNLL-2003 training sentences per probe (default %(default)s)")
      sub.add_argument("--dev_sentences", type=int, default=300,
                       help="CoNLL-2003 dev sentences scored (default %(default)s)")
      sub.add_argument("--steps", type=int, default=300,
                       help="optimizer steps per probe (default %(default)s)")
  return top


def main(argv=None) -> int:
  args = parser().parse_args(argv)
  if args.verbosity is not None:
    from absl import logging  # pylint: disable=g-import-not-at-top
    logging.set_verbosity(args.verbosity)
  quiet.configure(args.verbosity is not None)
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


def command() -> None:
  """`bertjax analyze` / `python -m bertjax.analysis`."""
  sys.exit(main())


if __name__ == "__main__":
  command()
