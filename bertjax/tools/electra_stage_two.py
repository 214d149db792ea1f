r"""Two-stage ELECTRA (Clark et al., 2020, Section 3.2): the discriminator of stage two
starts from the generator trained alone in stage one.

  python -m bertjax.tools.electra_stage_two --stage_one=STAGE_ONE_DIR --out=INIT_DIR

then run stage two (gin/objectives/electra_two_stage_discriminator.gin) with
INIT_CHECKPOINT = INIT_DIR.
"""
from absl import app, flags

import dataclasses
import logging

from bertjax import output_paths
from bertjax.checkpoints import record
from bertjax.checkpoints.params import PARAMS_ITEM, load_params, save_params
from bertjax.models import electra


def prepare_second_stage(stage_one_dir: str, out_dir: str) -> None:
  """Writes a params checkpoint (for stage two's `init_checkpoint`) holding stage one's
  weights with the discriminator started from the generator, and the run's model record
  (the joint model, released as its discriminator) pointing at them."""
  params, metadata = load_params(stage_one_dir)
  try:
    stage_one, _ = record.find(stage_one_dir)
  except (ValueError, FileNotFoundError) as e:  # a model_dir bertjax cannot describe
    logging.warning("No %s for %s: %s", record.FILE, out_dir, e)
    stage_one = None
  save_params(out_dir, electra.discriminator_from_generator(params),
              {**metadata, "electra_stage_one": stage_one_dir})
  if stage_one is not None:
    record.write(out_dir, dataclasses.replace(stage_one, weights=PARAMS_ITEM, tokenizer=None,
                                              source=stage_one_dir))


def main(argv):
  del argv
  output_paths.claim_folder(flags.FLAGS.out, "--out", flags.FLAGS.overwrite,
                            reads=[flags.FLAGS.stage_one])
  prepare_second_stage(flags.FLAGS.stage_one, flags.FLAGS.out)
  print(f"Wrote {flags.FLAGS.out}; bind INIT_CHECKPOINT = {flags.FLAGS.out!r} for stage two.")


if __name__ == "__main__":
  flags.DEFINE_string("stage_one", None, "The stage-one run's model_dir.", required=True)
  flags.DEFINE_string("out", None, "Where to write stage two's init checkpoint.", required=True)
  flags.DEFINE_bool("overwrite", False, "Replace an existing --out folder.")
  app.run(main)
