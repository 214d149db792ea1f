#!/usr/bin/env bash
# shellcheck disable=SC2034  # the variables are read by the scripts that source this.
# Shared flags and helpers of the tpu_scripts/*.sh commands (sourced, not run).
#
# Every gcloud / gsutil / local command goes through `run`, which prints it
# (shell-quoted, ready to paste) and executes it unless --dry_run is given.

set -euo pipefail

NAME="${TPU_NAME:-}"
ZONE="${TPU_ZONE:-}"
PROJECT="${TPU_PROJECT:-}"
ACCELERATOR_TYPE="v4-8"
RUNTIME_VERSION="tpu-ubuntu2204-base"
NUM_SLICES=1
PREEMPTIBLE=0
SPOT=0
QUEUED=0
VALID_UNTIL=""
DRY_RUN=0
REMOTE_DIR="bertjax"      # on every worker, relative to the ssh user's home
LOG_FILE="bertjax_run.log"
EXTRA=()                  # anything after `--`

usage_common() {
  cat <<'USAGE'
Common flags (every script):
  --name=NAME               TPU VM / pod slice name (env TPU_NAME); required
  --zone=ZONE               e.g. us-central2-b (env TPU_ZONE); required
  --project=PROJECT         GCP project (env TPU_PROJECT; default: gcloud's)
  --num_slices=N            multi-slice job of N slices NAME-0..NAME-(N-1) (queued resources)
  --dry_run                 print the commands without running them
USAGE
}

die() {
  echo "error: $*" >&2
  exit 2
}

# Parses the common flags; a script's own flags are handled by its `own_flag`
# function (returns 1 for flags it does not know).
parse_flags() {
  while (($#)); do
    case "$1" in
      --name=*) NAME="${1#*=}" ;;
      --zone=*) ZONE="${1#*=}" ;;
      --project=*) PROJECT="${1#*=}" ;;
      --accelerator_type=*) ACCELERATOR_TYPE="${1#*=}" ;;
      --runtime_version=*) RUNTIME_VERSION="${1#*=}" ;;
      --num_slices=*) NUM_SLICES="${1#*=}" ;;
      --preemptible) PREEMPTIBLE=1 ;;
      --spot) SPOT=1 ;;
      --queued) QUEUED=1 ;;
      --valid_until=*) VALID_UNTIL="${1#*=}" ;;
      --dry_run) DRY_RUN=1 ;;
      --help | -h)
        usage
        exit 0
        ;;
      --)
        shift
        EXTRA=("$@")
        break
        ;;
      *) own_flag "$1" || die "unknown flag $1 (see --help)" ;;
    esac
    shift
  done
  [[ -n "$NAME" ]] || die "--name=NAME is required"
  [[ -n "$ZONE" ]] || die "--zone=ZONE is required"
  [[ "$NUM_SLICES" =~ ^[1-9][0-9]*$ ]] || die "--num_slices=$NUM_SLICES: expected a positive integer"
  if ((NUM_SLICES > 1)); then
    QUEUED=1 # Multi-slice jobs exist only as queued resources.
  fi
}

# One word, quoted for a POSIX shell only when it needs to be (--flag='a value').
quote() {
  if [[ "$1" =~ ^[A-Za-z0-9_./=:,@%+-]+$ ]]; then
    printf '%s' "$1"
  elif [[ "$1" =~ ^(--[A-Za-z0-9_-]+=)(.*)$ ]]; then
    printf '%s' "${BASH_REMATCH[1]}"
    quote "${BASH_REMATCH[2]}"
  else
    printf "'%s'" "${1//\'/\'\\\'\'}"
  fi
}

# Prints a command, then runs it unless --dry_run.
run() {
  local first=1 word
  for word in "$@"; do
    ((first)) || printf ' '
    quote "$word"
    first=0
  done
  printf '\n'
  if ((!DRY_RUN)); then
    "$@"
  fi
}

# gcloud's --zone / --project flags.
location_flags() {
  LOCATION=("--zone=$ZONE")
  if [[ -n "$PROJECT" ]]; then
    LOCATION+=("--project=$PROJECT")
  fi
}

# The TPU VM node(s) of the run: NAME, or NAME-0 .. NAME-(N-1) for N slices.
nodes() {
  if ((NUM_SLICES == 1)); then
    echo "$NAME"
  else
    local i
    for ((i = 0; i < NUM_SLICES; i++)); do
      echo "$NAME-$i"
    done
  fi
}

# Runs a shell command on every worker of every node (in parallel within a node).
on_all_workers() {
  local node
  location_flags
  while read -r node; do
    run gcloud compute tpus tpu-vm ssh "$node" --worker=all "${LOCATION[@]}" --command="$1"
  done < <(nodes)
}
