#!/usr/bin/env bash
# Deletes the TPU VM / pod slice (with --queued or --num_slices: the queued resource
# and its nodes). Copy results first (copy_results.sh): worker disks go with it.
#
#   tpu_scripts/delete.sh --name=bert --zone=us-central2-b [--queued]
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

usage() {
  echo "Usage: delete.sh --name=NAME --zone=ZONE [--queued]"
  usage_common
}

own_flag() { return 1; }

parse_flags "$@"
location_flags
if ((QUEUED)); then
  run gcloud compute tpus queued-resources delete "$NAME" "${LOCATION[@]}" --force --quiet
else
  run gcloud compute tpus tpu-vm delete "$NAME" "${LOCATION[@]}" --quiet
fi
