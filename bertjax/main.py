r"""Train and / or evaluate a model, configured entirely by gin (`bertjax train`).

  python -m bertjax.main --gin_file=gin/quickstart.gin --model_dir=/tmp/quickstart
  python -m bertjax.main --gin_file=models/bert_base.gin --gin_file=objectives/mlm_nsp.gin \
      --gin_file=runs/pretrain.gin --gin_bindings="Trainer.batch_size = 512" \
      --model_dir=gs://bucket/run --mode=train

gin files are looked up as given, then under the repository's gin/ folder. The
effective config is written to model_dir/config.gin before training starts, and the
operative one (what was actually used) to model_dir/operative_config.gin at the end.
Re-running the same command resumes from the newest intact checkpoint in model_dir. What
cannot work (a different model over a run's checkpoints, no intact checkpoint, nothing to
evaluate) stops before anything is computed or written, with one line saying what to do.

Multi-host (one command per host; see bertjax/train/distributed.py and tpu_scripts/):
  python -m bertjax.main ... --coordinator_address=10.0.0.2:8476 --num_processes=4 --process_id=$I
On a Cloud TPU VM pod slice the processes are found automatically (--multihost=auto).
"""
import importlib
import os
import pkgutil
import sys

from absl import app, flags
import gin

from bertjax import checkpoints, cli, configurables, run_lock
from bertjax.train import distributed, inputs as train_inputs, preemption, trainer

# Packages whose modules register gin configurables that gin files refer to by name;
# all are imported before parsing so any family's config parses (and typos fail).
CONFIGURABLE_PACKAGES = ("bertjax.objectives", "bertjax.models", "bertjax.data")
CONFIGURABLE_MODULES = ("bertjax.configurables", "bertjax.train.optimizers",
                        "bertjax.train.partitioning", "bertjax.train.inputs",
                        "bertjax.train.evaluators")

_GIN_FILE = flags.DEFINE_multi_string("gin_file", [], "gin config file(s), applied in order.")
_GIN_BINDINGS = flags.DEFINE_multi_string("gin_bindings", [],
                                          "Individual gin bindings, applied after the files.")
_MODEL_DIR = flags.DEFINE_string("model_dir", None, "Output directory of the run.", required=True)
cli.alias("gin_param", "gin_bindings")
cli.alias("output_dir", "model_dir")
_MODE = flags.DEFINE_enum("mode", "train_and_evaluate",
                          ["train", "evaluate", "train_and_evaluate"], "What to run.")

CONFIG_FILE = "config.gin"
OPERATIVE_CONFIG_FILE = "operative_config.gin"


def register_configurables() -> None:
  """Imports every module that defines gin configurables a config may name."""
  for name in CONFIGURABLE_MODULES:
    importlib.import_module(name)
  for package_name in CONFIGURABLE_PACKAGES:
    package = importlib.import_module(package_name)
    for info in pkgutil.walk_packages(package.__path__, package_name + "."):
      importlib.import_module(info.name)


def parse_gin(gin_files: list[str], gin_bindings: list[str]) -> None:
  """Parses configs (searching gin/ as well), with errors that name the file."""
  register_configurables()
  if not gin_files and not gin_bindings:
    raise app.UsageError("Give at least one --gin_file (e.g. --gin_file=gin/quickstart.gin).")
  configurables.parse_config(gin_files, gin_bindings)


def _write(model_dir: str, name: str, text: str) -> None:
  import jax  # Local: keep `--help` fast.
  if jax.process_index() == 0:
    with open(os.path.join(model_dir, name), "w") as f:
      f.write(text)


class ModelDirError(ValueError):
  """--model_dir cannot hold a run (a file, not writable); the message says which."""


def check_model_dir(model_dir: str) -> None:
  """Refuses a model_dir that is a file, or that cannot be created or written."""
  if "://" in model_dir:
    return
  if os.path.exists(model_dir) and not os.path.isdir(model_dir):
    raise ModelDirError(f"--model_dir={model_dir} is a file; give a folder.")
  existing = model_dir
  while not os.path.exists(existing):
    existing = os.path.dirname(existing)
  if not os.path.isdir(existing) or not os.access(existing, os.W_OK | os.X_OK):
    raise ModelDirError(f"--model_dir={model_dir}: {existing} is not a writable folder; choose "
                        "a folder you can write to.")


def run(model_dir: str, mode: str) -> dict:
  """Builds the configured Trainer and checks it against model_dir (failing on bad
  bindings or an unusable model_dir before any compute or write), then runs it."""
  model_dir = os.path.abspath(model_dir)
  check_model_dir(model_dir)
  job = trainer.Trainer(model_dir=model_dir)
  job.check(mode)
  os.makedirs(model_dir, exist_ok=True)
  with run_lock.hold(model_dir, "training run"):
    _write(model_dir, CONFIG_FILE, gin.config_str())
    results = job.run(mode)
    _write(model_dir, OPERATIVE_CONFIG_FILE, gin.operative_config_str())
  return results


def _report(model_dir: str, results: dict) -> None:
  model_dir = os.path.abspath(model_dir)
  lines = ["", f"Done. Results in {model_dir}:"]
  evals = results.get("eval") if "eval" in results else results
  if evals:
    lines.append("  eval: " + ", ".join(f"{k}={v:.4f}" for k, v in sorted(evals.items())
                                        if isinstance(v, float)))
  for key, label in (("checkpoints", "checkpoints"), ("loss_curve", "loss curve"),
                     ("tensorboard", "TensorBoard")):
    if results.get(key):
      lines.append(f"  {label}: {results[key]}")
  lines.append(f"  metrics log: {os.path.join(model_dir, 'metrics.jsonl')}; config: "
               f"{os.path.join(model_dir, CONFIG_FILE)}")
  if results.get("tensorboard"):
    lines.append(f"  view: tensorboard --logdir {results['tensorboard']}")
  print("\n".join(lines), flush=True)


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
  try:  # Multi-process runs join before anything touches a JAX backend.
    distributed.initialize_from_flags()
  except (ValueError, distributed.DistributedInitError) as e:
    sys.exit(f"Could not start the multi-process run: {e}")
  try:
    parse_gin(_GIN_FILE.value, _GIN_BINDINGS.value)
  except (ValueError, IOError, SyntaxError) as e:
    sys.exit(f"Bad gin config: {e}")
  try:
    results = run(_MODEL_DIR.value, _MODE.value)
  except trainer.NonFiniteLossError as e:
    sys.exit(f"Training stopped: {e}")
  except checkpoints.CheckpointError as e:
    sys.exit(f"Stopped: {e}")
  except (run_lock.LockError, ModelDirError) as e:
    sys.exit(f"Not started: {e}")
  except train_inputs.DataError as e:
    sys.exit(f"Stopped: {e}")
  except preemption.Preempted as e:
    print(e, file=sys.stderr, flush=True)
    sys.exit(e.exit_status)
  if distributed.is_coordinator():
    _report(_MODEL_DIR.value, results)


def command() -> None:
  """`bertjax train` / `python -m bertjax.main`."""
  cli.run(main, __doc__)


if __name__ == "__main__":
  command()
