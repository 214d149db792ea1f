#!/bin/bash
# Cross-family fine-tuning on this CPU (issue: every family, end to end): small RoBERTa, ALBERT
# and ELECTRA models pretrained here by `bertjax.main` on the embedded corpus, each then
# fine-tuned with its own tokenizer (read from its model_dir) on SST-2, MRPC and CoNLL-2003.
# Resumable: a pretraining run resumes from its checkpoints, a fine-tuning run whose
# results.json exists is skipped. Usage:
#   experiments/finetune/families.sh [OUT_DIR] [PRETRAIN_STEPS] [MAX_TRAIN_ROWS]
# MAX_TRAIN_ROWS caps the SST-2 and CoNLL-2003 training rows (0: SST-2's first 10,000 and all
# of CoNLL-2003's 14,041 sentences); MRPC always trains on its 3,668 pairs.
set -euo pipefail
OUT=${1:-experiments/finetune/out_families}
STEPS=${2:-600}
ROWS=${3:-0}
SST2_ROWS=$([ "$ROWS" -gt 0 ] && echo "$ROWS" || echo 10000)
LOGS=$OUT/logs
mkdir -p "$OUT" "$LOGS"
SMALL="build_model.config_overrides = {'hidden_size': 128, 'num_layers': 2, 'num_heads': 2, 'intermediate_size': 512}"

pretrain() {  # name, run gin, model gin, objective gin
  local name=$1 run=$2 model=$3 objective=$4
  /usr/bin/time -v python -m bertjax.main --model_dir="$OUT/$name/pretrain" \
    --gin_file="gin/runs/$run.gin" --gin_file="gin/models/$model.gin" \
    --gin_file="gin/objectives/$objective.gin" \
    --gin_bindings="$SMALL" --gin_bindings="Trainer.num_train_steps = $STEPS" \
    --gin_bindings="Trainer.batch_size = 32" --gin_bindings="Trainer.sequence_length = 128" \
    --gin_bindings="Trainer.log_every = 50" --gin_bindings="Trainer.checkpoint_every = 200" \
    --gin_bindings="Trainer.eval_every = $STEPS" --gin_bindings="Trainer.eval_steps = 4" \
    --gin_bindings="Trainer.show_progress = False" > "$LOGS/$name.pretrain.log" 2>&1
}

finetune() {  # family, task, flags...
  local name=$1 task=$2; shift 2
  [ -f "$OUT/$name/$task/results.json" ] && return 0
  /usr/bin/time -v python -m bertjax.finetune.run --checkpoint="$OUT/$name/pretrain" \
    --output_dir="$OUT/$name/$task" --batch_size=32 --learning_rate=1e-4 --log_every=50 \
    --task="$task" "$@" > "$LOGS/$name.$task.log" 2>&1
}

for spec in "roberta roberta_pretrain roberta_base roberta_mlm" \
            "albert albert_pretrain albert_base albert_mlm_sop" \
            "electra pretrain electra_small electra"; do
  set -- $spec
  name=$1
  pretrain "$@"
  finetune "$name" sst2 --max_train_examples="$SST2_ROWS" --num_epochs=1 --max_seq_length=64
  finetune "$name" mrpc --num_epochs=2 --max_seq_length=128
  finetune "$name" conll2003 --max_train_examples="$ROWS" --num_epochs=1 --max_seq_length=128
done
