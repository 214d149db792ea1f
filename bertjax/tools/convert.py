r"""Convert between Hugging Face model directories and bertjax checkpoints.

  python -m bertjax.convert --from_hf=HF_DIR --out=CKPT_DIR
  python -m bertjax.convert --to_hf=HF_DIR --checkpoint=CKPT_DIR

CKPT_DIR is what gin's `init_checkpoint` accepts; tokenizer files travel along.
--checkpoint takes anything `bertjax.open_model` opens, a `python -m bertjax.main`
model_dir included (its latest step; an architecture Hugging Face has).
"""
import sys

from absl import app, flags, logging

from bertjax import cli, output_paths
from bertjax.checkpoints import converted as checkpoint
from bertjax.checkpoints.formats import open_model
from bertjax import files
from bertjax.checkpoints import model

FLAGS = flags.FLAGS


def _define_flags() -> None:
  """At the command's start, not on import: other commands share these names."""
  flags.DEFINE_string("from_hf", None, "Hugging Face model directory to read.")
  flags.DEFINE_string("out", None, "Where to write the bertjax checkpoint (with --from_hf).")
  cli.alias("output_dir", "out")
  flags.DEFINE_string("to_hf", None, "Hugging Face model directory to write.")
  flags.DEFINE_string("checkpoint", None, "bertjax checkpoint or bertjax.main model_dir to "
                      "export (with --to_hf).")
  flags.DEFINE_boolean("overwrite", False, "Replace an existing --out / --to_hf folder (never "
                       "one that is read).")


def from_hf(hf_dir: str, out_dir: str, overwrite: bool = False) -> model.HFModel:
  files.check_tokenizer_files(hf_dir)  # before anything is written
  converted = model.from_hf(hf_dir)
  out_dir = output_paths.claim_folder(out_dir, "--out", overwrite, reads=[hf_dir])
  checkpoint.save(converted, out_dir, tokenizer_from=hf_dir, source=hf_dir)
  return converted


def to_hf(checkpoint_dir: str, hf_dir: str, overwrite: bool = False) -> model.HFModel:
  loaded = open_model(checkpoint_dir)
  loaded.family.check_architecture(loaded.architecture)  # e.g. a run's SpanBERT SBO head
  files.check_tokenizer_files(loaded.tokenizer_dir)  # before anything is written
  model.check_exportable(loaded.config)
  hf_dir = output_paths.claim_folder(hf_dir, "--to_hf", overwrite,
                                     reads=[checkpoint_dir, loaded.tokenizer_dir])
  model.to_hf(loaded, hf_dir)  # checks the weights against the config before writing
  checkpoint.copy_tokenizer_files(loaded.tokenizer_dir, hf_dir, loaded.architecture)
  return loaded


def main(argv):
  try:
    convert(argv)
  except (ValueError, FileNotFoundError) as e:  # bad input: say what, without a traceback
    sys.exit(f"python -m bertjax.convert: {e}")


def convert(argv):
  del argv
  if FLAGS.from_hf and FLAGS.out and not (FLAGS.to_hf or FLAGS.checkpoint):
    converted = from_hf(FLAGS.from_hf, FLAGS.out, FLAGS.overwrite)
    logging.info("Wrote %s (%s) to %s", converted.architecture, converted.family.name, FLAGS.out)
    print(f"Converted {FLAGS.from_hf} ({converted.architecture}) -> {FLAGS.out}")
  elif FLAGS.to_hf and FLAGS.checkpoint and not (FLAGS.from_hf or FLAGS.out):
    exported = to_hf(FLAGS.checkpoint, FLAGS.to_hf, FLAGS.overwrite)
    print(f"Exported {FLAGS.checkpoint} ({exported.architecture}) -> {FLAGS.to_hf}")
  else:
    raise app.UsageError("Use either --from_hf=DIR --out=DIR or --to_hf=DIR --checkpoint=DIR.")


def run() -> None:
  """`bertjax convert` / `python -m bertjax.convert`."""
  _define_flags()
  cli.run(main, __doc__)


if __name__ == "__main__":
  run()
