#!/usr/bin/env bash
# lora_side_by_side.sh — LoRA fine-tuning throughput: `tern train --bench --lora-base MODEL` and
# the same work in PyTorch (bench/peers/train_torch.py: the base's shape frozen in F32, rank-R
# adapters on all seven matrices, one n_ctx sequence per step, every token trained on, AdamW),
# in alternating rounds in the same minutes. Prints each round and the medians, and the ratio
# tern / PyTorch (above 1: tern ahead).
#
# PyTorch and the gguf package come from a virtual environment: $PYTHON, else bench/peers/.venv
# (made with: python3 -m venv bench/peers/.venv && bench/peers/.venv/bin/pip install torch gguf).
# Pause any background job while this runs (kill -STOP / -CONT).
#
# usage: bench/peers/lora_side_by_side.sh MODEL.gguf [ROUNDS=2] [STEPS=4] [THREADS=2] [RANK=16]
set -u
MODEL=${1:?usage: lora_side_by_side.sh MODEL.gguf [ROUNDS] [STEPS] [THREADS] [RANK]}
ROUNDS=${2:-2} STEPS=${3:-4} THREADS=${4:-2} RANK=${5:-16}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
TERN=${TERN:-$ROOT/build/bin/tern}
PY=${PYTHON:-$ROOT/bench/peers/.venv/bin/python}
[ -x "$TERN" ] || { echo "build tern first ($TERN)"; exit 2; }
"$PY" -c 'import torch, gguf' 2>/dev/null || {
    echo "no PyTorch + gguf at $PY: python3 -m venv bench/peers/.venv && bench/peers/.venv/bin/pip install torch gguf"; exit 2; }
tern_tps=() torch_tps=()
for r in $(seq "$ROUNDS"); do
    t=$("$TERN" train --bench --lora-base "$MODEL" --lora-rank "$RANK" --steps "$STEPS" -t "$THREADS" --json 2>/dev/null |
        grep -o '"tokens_per_s":[ ]*[0-9.]*' | grep -o '[0-9.]*$')
    p=$("$PY" "$ROOT/bench/peers/train_torch.py" "$MODEL" --rank "$RANK" --steps "$STEPS" --threads "$THREADS" |
        grep -o '"tokens_per_s":[ ]*[0-9.]*' | grep -o '[0-9.]*$')
    echo "round $r: tern $t tokens/s, PyTorch $p tokens/s (load $(cut -d' ' -f1 /proc/loadavg))"
    tern_tps+=("$t") torch_tps+=("$p")
done
med() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }
mt=$(med "${tern_tps[@]}") mp=$(med "${torch_tps[@]}")
echo "median: tern $mt, PyTorch $($PY -c 'import torch; print(torch.__version__)') $mp tokens/s; tern / PyTorch $(awk -v a="$mt" -v b="$mp" 'BEGIN {printf "%.2fx", a / b}')"
