#!/usr/bin/env bash
# Creates a TPU VM or pod slice (or, with --queued / --num_slices, a queued resource
# that the scheduler grants when capacity frees up) and waits until it is ready.
#
#   tpu_scripts/create.sh --name=bert --zone=us-central2-b --accelerator_type=v4-32 [--spot]
#   tpu_scripts/create.sh --name=bert --zone=us-central2-b --accelerator_type=v4-32 --queued --spot
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

usage() {
  cat <<'USAGE'
Usage: create.sh --name=NAME --zone=ZONE [flags]
  --accelerator_type=TYPE   e.g. v4-8 (1 host), v4-32 (4 hosts); default v4-8
  --runtime_version=V       TPU VM image; default tpu-ubuntu2204-base
  --preemptible             preemptible VM (direct create only)
  --spot                    Spot capacity (cheaper, can be reclaimed)
  --queued                  create through a queued resource (waits for capacity)
  --valid_until=DURATION    queued: give up if not granted by then, e.g. 6h
USAGE
  usage_common
}

own_flag() { return 1; }

parse_flags "$@"
location_flags

if ((!QUEUED)); then
  args=(gcloud compute tpus tpu-vm create "$NAME" "${LOCATION[@]}"
    "--accelerator-type=$ACCELERATOR_TYPE" "--version=$RUNTIME_VERSION")
  ((PREEMPTIBLE)) && args+=(--preemptible)
  ((SPOT)) && args+=(--spot)
  run "${args[@]}"
  exit 0
fi

((PREEMPTIBLE)) && die "--preemptible is for direct creation; queued resources use --spot"
args=(gcloud compute tpus queued-resources create "$NAME" "${LOCATION[@]}"
  "--accelerator-type=$ACCELERATOR_TYPE" "--runtime-version=$RUNTIME_VERSION")
if ((NUM_SLICES > 1)); then
  args+=("--node-count=$NUM_SLICES" "--node-prefix=$NAME")
else
  args+=("--node-id=$NAME")
fi
((SPOT)) && args+=(--spot)
[[ -n "$VALID_UNTIL" ]] && args+=("--valid-until-duration=$VALID_UNTIL")
run "${args[@]}"

# A queued resource is granted asynchronously: poll until its nodes exist.
describe=(gcloud compute tpus queued-resources describe "$NAME" "${LOCATION[@]}"
  "--format=value(state.state)")
if ((DRY_RUN)); then
  run "${describe[@]}"
  exit 0
fi
while true; do
  state="$(run "${describe[@]}" | tail -n 1)"
  echo "queued resource $NAME: $state"
  case "$state" in
    ACTIVE) break ;;
    FAILED | SUSPENDED) die "queued resource $NAME is $state (gcloud compute tpus queued-resources describe $NAME)" ;;
  esac
  sleep 30
done
