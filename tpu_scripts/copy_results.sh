#!/usr/bin/env bash
# Copies a run's results (checkpoints, metrics.jsonl, TensorBoard logs, configs) and
# worker 0's log to a local directory.
#
#   tpu_scripts/copy_results.sh --name=bert --zone=us-central2-b --model_dir=gs://B/run --dest=./run
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

MODEL_DIR=""
DEST=""

usage() {
  cat <<'USAGE'
Usage: copy_results.sh --name=NAME --zone=ZONE --model_dir=DIR --dest=LOCAL_DIR
  --model_dir=DIR           the run's --model_dir (gs://... or a path on worker 0)
  --dest=LOCAL_DIR          where to put it
USAGE
  usage_common
}

own_flag() {
  case "$1" in
    --model_dir=*) MODEL_DIR="${1#*=}" ;;
    --dest=*) DEST="${1#*=}" ;;
    *) return 1 ;;
  esac
}

parse_flags "$@"
[[ -n "$MODEL_DIR" && -n "$DEST" ]] || die "--model_dir and --dest are required"
location_flags
node="$(nodes | head -n 1)"
run mkdir -p "$DEST"
if [[ "$MODEL_DIR" == gs://* ]]; then
  run gcloud storage cp --recursive "${MODEL_DIR%/}" "$DEST"
else
  run gcloud compute tpus tpu-vm scp --recurse "$node:$MODEL_DIR" "$DEST" --worker=0 \
    "${LOCATION[@]}"
fi
run gcloud compute tpus tpu-vm scp "$node:$LOG_FILE" "$DEST" --worker=0 "${LOCATION[@]}"
