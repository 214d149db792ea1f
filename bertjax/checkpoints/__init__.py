"""Every on-disk format of a model: params checkpoints, training runs, converted Hugging Face
models; `formats.open_model` (exported as `bertjax.open_model`) opens any of them."""
from bertjax.checkpoints.integrity import CheckpointError
from bertjax.checkpoints.params import (METADATA_FILE, PARAMS_ITEM, RUN_SUBDIR, STATE_ITEM,
                                        load_params, restore_numpy, save_params)
from bertjax.checkpoints.run import CARRY_ITEM, EXTRA_ITEM, RunCheckpoints
