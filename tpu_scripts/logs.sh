#!/usr/bin/env bash
# Shows a worker's run log (worker 0 logs the metrics; the others only errors).
#
#   tpu_scripts/logs.sh --name=bert --zone=us-central2-b [--worker=all] [--follow]
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

WORKER=0
LINES=100
FOLLOW=0
NODE_INDEX=0

usage() {
  cat <<'USAGE'
Usage: logs.sh --name=NAME --zone=ZONE [flags]
  --worker=W                worker index or 'all'; default 0
  --node=I                  slice index of a multi-slice run; default 0
  --lines=N                 last N lines; default 100
  --follow                  keep streaming (Ctrl-C to stop; the run goes on)
USAGE
  usage_common
}

own_flag() {
  case "$1" in
    --worker=*) WORKER="${1#*=}" ;;
    --node=*) NODE_INDEX="${1#*=}" ;;
    --lines=*) LINES="${1#*=}" ;;
    --follow) FOLLOW=1 ;;
    *) return 1 ;;
  esac
}

parse_flags "$@"
[[ "$LINES" =~ ^[0-9]+$ ]] || die "--lines=$LINES: expected a number"
location_flags
mapfile -t all_nodes < <(nodes)
node="${all_nodes[$NODE_INDEX]:-}"
[[ -n "$node" ]] || die "--node=$NODE_INDEX: the run has ${#all_nodes[@]} node(s)"
tail_cmd="tail -n $LINES"
((FOLLOW)) && tail_cmd+=" -F"
run gcloud compute tpus tpu-vm ssh "$node" "--worker=$WORKER" "${LOCATION[@]}" \
  "--command=$tail_cmd ~/$LOG_FILE"
