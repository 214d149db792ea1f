#!/usr/bin/env bash
# Installs bertjax (the committed HEAD of this checkout) and JAX for TPU on every
# worker of every node, then checks that each worker sees the TPU chips.
#
#   tpu_scripts/install.sh --name=bert --zone=us-central2-b [--jax_spec='jax[tpu]==0.10.2']
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

SOURCE="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
JAX_SPEC="jax[tpu]"
ARCHIVE="${TMPDIR:-/tmp}/bertjax-src.tar.gz"

usage() {
  cat <<'USAGE'
Usage: install.sh --name=NAME --zone=ZONE [flags]
  --source=DIR              git checkout to install (default: this one); HEAD is shipped
  --jax_spec=SPEC           pip requirement for JAX on TPU; default 'jax[tpu]'
USAGE
  usage_common
}

own_flag() {
  case "$1" in
    --source=*) SOURCE="${1#*=}" ;;
    --jax_spec=*) JAX_SPEC="${1#*=}" ;;
    *) return 1 ;;
  esac
}

parse_flags "$@"
location_flags

# `git archive`: exactly the committed tree, without local caches or run outputs.
run git -C "$SOURCE" archive --format=tar.gz --output="$ARCHIVE" HEAD
while read -r node; do
  run gcloud compute tpus tpu-vm scp "$ARCHIVE" "$node:bertjax-src.tar.gz" --worker=all \
    "${LOCATION[@]}"
done < <(nodes)
on_all_workers "rm -rf $REMOTE_DIR && mkdir -p $REMOTE_DIR && \
tar -xzf bertjax-src.tar.gz -C $REMOTE_DIR && python3 -m pip install -q -U pip && \
python3 -m pip install -q -e ./$REMOTE_DIR \"$JAX_SPEC\""
# Every worker at once (as a real run): each prints its process index and chip count.
on_all_workers 'python3 -c "import jax; print(jax.process_index(), jax.device_count())"'
