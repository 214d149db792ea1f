"""`bertjax COMMAND [flags]`: every job from one command (also `python -m bertjax COMMAND`).

Each command is the module's own (`bertjax train` is `python -m bertjax.main`, with the same
flags), so both spellings keep working; `bertjax COMMAND --help` lists its flags.
"""
import importlib
import sys

# command -> ("module:function" running it, what it does)
COMMANDS = {
    "train": ("bertjax.main:command", "pretrain (and evaluate) a model configured by gin files"),
    "finetune": ("bertjax.finetune.run:command",
                 "fine-tune on a benchmark (GLUE, SQuAD, CoNLL-2003, SWAG) or your own files"),
    "predict": ("bertjax.predict.__main__:command",
                "predictions on your own text (a TSV / JSONL file) from any model folder"),
    "convert": ("bertjax.tools.convert:run", "Hugging Face folders <-> bertjax checkpoints"),
    "encode": ("bertjax.sbert.encode:run", "sentence embeddings, one row per input line"),
    "search": ("bertjax.sbert.search:run", "nearest sentences of a corpus"),
    "sbert": ("bertjax.sbert.train:run", "train a sentence-embedding model (SBERT)"),
    "analyze": ("bertjax.analysis.__main__:command",
                "attention statistics, head importance and pruning, probes"),
    "tables": ("bertjax.tables.__main__:command", "reproduce a paper's table, resumably"),
    "distill": ("bertjax.distill.student:command",
                "distil a fine-tuned classifier into a BiLSTM (or train one on labels)"),
    "distill-speed": ("bertjax.distill.speed:command", "time a teacher against its students"),
}


def usage() -> str:
  width = max(map(len, COMMANDS))
  lines = [__doc__.strip(), "", "commands:"]
  lines += [f"  {name:<{width}}  {what}" for name, (_, what) in COMMANDS.items()]
  return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
  """The `bertjax` console script."""
  argv = sys.argv[1:] if argv is None else argv
  if not argv or argv[0] in ("-h", "--help", "help"):
    print(usage())
    sys.exit(0 if argv else 2)
  name, rest = argv[0], argv[1:]
  if name not in COMMANDS:
    sys.exit(f"bertjax: no command {name!r}; use one of {', '.join(COMMANDS)} "
             "(bertjax --help says what each does).")
  module, function = COMMANDS[name][0].split(":")
  sys.argv = [f"bertjax {name}", *rest]
  getattr(importlib.import_module(module), function)()


if __name__ == "__main__":
  main()
