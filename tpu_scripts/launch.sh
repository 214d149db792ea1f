#!/usr/bin/env bash
# Starts one gin run on every worker of every node: the same `python3 -m bertjax.main`
# command everywhere; JAX finds the other workers itself on a TPU VM
# (bertjax.train.distributed, --multihost=auto). Runs in the background (nohup) with its
# output in ~/bertjax_run.log on each worker; follow it with logs.sh.
#
#   tpu_scripts/launch.sh --name=bert --zone=us-central2-b --model_dir=gs://B/run \
#       --gin_file=models/bert_base.gin --gin_file=objectives/mlm_nsp.gin -- --mode=train
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

GIN_FILES=()
GIN_BINDINGS=()
MODEL_DIR=""
FOREGROUND=0

usage() {
  cat <<'USAGE'
Usage: launch.sh --name=NAME --zone=ZONE --model_dir=DIR --gin_file=FILE... [flags] [-- main flags]
  --model_dir=DIR           run directory; gs://... so that every worker shares it
  --gin_file=FILE           repeatable; looked up under the repository's gin/ too
  --gin_bindings=BINDING    repeatable, e.g. --gin_bindings='Trainer.batch_size = 512'
  --foreground              stay attached and stream the output instead of nohup
  -- ARGS                   passed on to python3 -m bertjax.main
USAGE
  usage_common
}

own_flag() {
  case "$1" in
    --gin_file=*) GIN_FILES+=("${1#*=}") ;;
    --gin_bindings=*) GIN_BINDINGS+=("${1#*=}") ;;
    --model_dir=*) MODEL_DIR="${1#*=}" ;;
    --foreground) FOREGROUND=1 ;;
    *) return 1 ;;
  esac
}

parse_flags "$@"
[[ -n "$MODEL_DIR" ]] || die "--model_dir=DIR is required (gs://bucket/path on a pod slice)"
((${#GIN_FILES[@]})) || die "give at least one --gin_file"
if [[ "$MODEL_DIR" != gs://* ]]; then
  echo "warning: --model_dir=$MODEL_DIR is not on GCS; with more than one worker every" \
    "worker must see the same directory for the checkpoints." >&2
fi

main=(python3 -m bertjax.main "--model_dir=$MODEL_DIR")
for f in "${GIN_FILES[@]}"; do main+=("--gin_file=$f"); done
for b in "${GIN_BINDINGS[@]}"; do main+=("--gin_bindings=$b"); done
main+=("${EXTRA[@]}")
command_line=""
for word in "${main[@]}"; do command_line+="$(quote "$word") "; done

if ((FOREGROUND)); then
  on_all_workers "cd $REMOTE_DIR && ${command_line}2>&1 | tee ~/$LOG_FILE"
else
  on_all_workers "cd $REMOTE_DIR && nohup ${command_line}> ~/$LOG_FILE 2>&1 < /dev/null &"
fi
