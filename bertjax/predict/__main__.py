r"""Predictions for every row of a TSV or JSONL file (`bertjax predict`).

  python -m bertjax.predict --model=OUT --input=texts.tsv --output=predictions.jsonl
  bertjax predict --model=OUT --input=pairs.jsonl --columns=text=sentence1,text_pair=sentence2

--model is any folder bertjax.open_model reads; --task defaults to the one its model class
does (`bertjax.pipeline("auto", ...)`). A TSV's or CSV's first line names its columns; a
JSONL line is an object (or a bare string, the text). The task reads these fields, which --columns
renames (FIELD=COLUMN, comma-separated):

  text-classification    text [, text_pair]     token-classification   text
  question-answering     question, context      fill-mask              text (with the mask)
  sentence-embeddings    text                   text2text-generation   text

The output is JSONL, one line per input row: the row's fields and its `prediction`, as
`bertjax.pipeline` returns it (labels by name). Sentence embeddings go to a .npy instead
when --output ends with .npy.
"""
import json
import sys

import numpy as np
from absl import flags

from bertjax import cli, output_paths
from bertjax.evaluation import readers

FLAGS = flags.FlagValues()
FIELDS = {"text-classification": ("text", "text_pair"),
          "question-answering": ("question", "context")}
OPTIONAL = ("text_pair",)


def _define_flags() -> None:
  """At the command's start, once per process (the dispatcher may run it again)."""
  from bertjax.predict import tasks  # pylint: disable=g-import-not-at-top
  if "model" in FLAGS:
    return
  flags.DEFINE_string("model", None, "The model: any folder bertjax.open_model reads (a "
                      "fine-tuning's OUTPUT_DIR, a converted or Hugging Face folder).",
                      flag_values=FLAGS)
  cli.alias("checkpoint", "model", FLAGS)
  flags.DEFINE_enum("task", tasks.AUTO, [tasks.AUTO, *tasks.TASKS, *tasks.ALIASES],
                    "What to predict; 'auto': the task of the model's class.", flag_values=FLAGS)
  flags.DEFINE_string("input", None, "A .tsv or .csv (its first line names the columns) or "
                      ".jsonl file, one input per row.", flag_values=FLAGS)
  flags.DEFINE_string("output", None, "Where the predictions go: a .jsonl (a .npy for "
                      "sentence embeddings); default: printed.", flag_values=FLAGS)
  flags.DEFINE_bool("overwrite", False, "Replace an existing --output file.", flag_values=FLAGS)
  flags.DEFINE_list("columns", [], "FIELD=COLUMN renames: which column holds each field the "
                    "task reads (e.g. text=sentence1,text_pair=sentence2).", flag_values=FLAGS)
  flags.DEFINE_string("tokenizer", None, "Tokenizer folder; default: the model's own.",
                      flag_values=FLAGS)
  flags.DEFINE_integer("batch_size", 32, "Rows per forward pass.", flag_values=FLAGS)
  flags.DEFINE_bool("packing", True, "Several inputs per row (no compute on padding) where the "
                    "model's class can; --packing=false: one per row.", flag_values=FLAGS)
  flags.DEFINE_integer("max_seq_length", None, "Tokens per row (longer inputs are cut); "
                       "default: the model's position table.", flag_values=FLAGS)
  flags.DEFINE_integer("top_k", None, "Labels (text-classification) or words (fill-mask) "
                       "per prediction; default: the task's (1 label, 5 words).",
                       flag_values=FLAGS)


def read_rows(path: str) -> list[dict]:
  """The rows of a .tsv / .csv with a header or a .jsonl (`readers.read_records`); a row
  none of these is an error (each input gets its prediction, or none does)."""
  skips = readers.SkipLog()
  rows = [row for _, row in readers.read_records(path, skips)]
  if skips:
    raise ValueError(f"{path}: {skips.summary()}.")
  readers.require_rows(path, len(rows), skips)
  return rows


def inputs_of(rows: list[dict], task: str, renames: dict[str, str], path: str) -> list:
  """Each row as the pipeline of `task` takes it (a text, a dict of the task's fields)."""
  fields = FIELDS.get(task, ("text",))
  found = []
  for number, row in enumerate(rows, start=1):
    values = {}
    for field in fields:
      column = renames.get(field, field)
      if column in row and row[column] not in (None, ""):
        values[field] = row[column]
      elif field not in OPTIONAL:
        raise ValueError(f"{path}: row {number} has no {column!r} ({task} reads "
                         f"{', '.join(fields)}; its fields: {', '.join(row)}). Name the "
                         f"column with --columns={field}=COLUMN.")
    found.append(values["text"] if set(values) == {"text"} else values)
  return found


def _renames(columns: list[str]) -> dict[str, str]:
  renames = {}
  for item in columns:
    field, eq, column = item.partition("=")
    if not eq or not field or not column:
      raise ValueError(f"--columns={item}: give FIELD=COLUMN, e.g. text=sentence1.")
    renames[field] = column
  return renames


def main(argv: list[str]) -> None:
  from bertjax.predict import tasks  # pylint: disable=g-import-not-at-top
  if len(argv) > 1:
    raise ValueError(f"Unexpected arguments {argv[1:]}; see --help.")
  for name in ("model", "input"):
    if FLAGS[name].value is None:
      raise ValueError(f"--{name} is required; see --help.")
  output = None
  if FLAGS.output:  # refused before any work when it exists (bertjax.output_paths)
    output = output_paths.claim_file(FLAGS.output, "--output", FLAGS.overwrite,
                                     reads=[FLAGS.model, FLAGS.input, FLAGS.tokenizer])
  rows = read_rows(FLAGS.input)
  options = {"batch_size": FLAGS.batch_size, "max_seq_length": FLAGS.max_seq_length,
             "packing": FLAGS.packing}
  predict = tasks.pipeline(FLAGS.task, FLAGS.model, FLAGS.tokenizer, **options)
  inputs = inputs_of(rows, predict.task, _renames(FLAGS.columns), FLAGS.input)
  call = {} if FLAGS.top_k is None else {"top_k": FLAGS.top_k}
  results = predict(inputs, **call)
  if isinstance(results, np.ndarray):  # sentence embeddings
    if output and output.endswith(".npy"):
      np.save(output, results)
      print(f"Wrote {results.shape} ({predict.task}) to {FLAGS.output}")
      return
    results = results.tolist()
  lines = [json.dumps({**row, "prediction": result}, ensure_ascii=False, default=float)
           for row, result in zip(rows, results)]
  if output:
    with open(output, "w", encoding="utf-8") as f:
      f.write("".join(line + "\n" for line in lines))
    print(f"Wrote {len(lines)} predictions ({predict.task}) to {FLAGS.output}")
  else:
    print("\n".join(lines))


def cli_main(argv: list[str]) -> None:
  """main, with bad input said in one line (exit status 1)."""
  try:
    main(argv)
  except (ValueError, FileNotFoundError) as e:
    sys.exit(f"bertjax predict: {e}")


def command() -> None:
  """`bertjax predict` / `python -m bertjax.predict`."""
  _define_flags()
  try:
    cli.run(cli_main, __doc__, FLAGS)
  finally:
    FLAGS.unparse_flags()


if __name__ == "__main__":
  command()
