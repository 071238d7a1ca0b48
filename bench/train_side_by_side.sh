#!/usr/bin/env bash
# train_side_by_side.sh — training throughput of `tern train --bench` and of the same model in
# PyTorch (tests/train_torch_ref.py bench), in alternating rounds on the same machine.
#
# Both train the same configuration (default: llama, n_embd 384, 6 layers, 6 heads, n_ff 1024,
# vocab 8192, n_ctx 1024, one 1024-token sequence per step, 2 threads) on random tokens: forward,
# backward and AdamW, one untimed warm-up step each. Reported per engine: the median tokens/s
# over the rounds (wall clock) and the CPU seconds per step (user + sys of the process, which a
# busy machine inflates far less than wall time), and the ratios tern / PyTorch. PyTorch is
# the first of $PYTHON (bench/peers/run.sh sets it to its virtual environment's PyTorch 2.x),
# python3, /usr/bin/python3 that imports torch (Debian's python3-torch is 1.13: explicit
# attention, no fused kernel, over OpenBLAS). When the machine is shared, look at `uptime` and repeat when the load is low.
#
# usage: bench/train_side_by_side.sh [ROUNDS=3] [STEPS=3] [THREADS=2]
set -u
ROUNDS=${1:-3}
STEPS=${2:-3}
THREADS=${3:-2}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
TERN=${TERN:-$ROOT/build/bin/tern}
PY=""
for p in ${PYTHON:-} python3 /usr/bin/python3; do
    if $p -c 'import torch' >/dev/null 2>&1; then PY=$p; break; fi
done
[ -x "$TERN" ] || { echo "build tern first ($TERN)"; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# cpu_of FILE: user+sys seconds from /usr/bin/time -f "%U %S"
run() { # run NAME CMD... -> appends "tokens_per_s cpu_s" to $tmp/NAME
    local name=$1; shift
    /usr/bin/time -f "%U %S" -o "$tmp/time" "$@" > "$tmp/out" 2>/dev/null || { echo "$name failed"; return; }
    local tps cpu
    tps=$(grep -o '"tokens_per_s":[ ]*[0-9.]*' "$tmp/out" | grep -o '[0-9.]*$')
    cpu=$(awk '{print $1 + $2}' "$tmp/time")
    echo "$tps $cpu" >> "$tmp/$name"
}
for r in $(seq "$ROUNDS"); do
    echo "round $r/$ROUNDS (load: $(cut -d' ' -f1-3 /proc/loadavg))" >&2
    run tern1 "$TERN" train --bench --steps 1 -t "$THREADS" --json
    run tern "$TERN" train --bench --steps $((STEPS + 1)) -t "$THREADS" --json
    if [ -n "$PY" ]; then
        run torch1 "$PY" "$ROOT/tests/train_torch_ref.py" bench steps=1 threads="$THREADS"
        run torch "$PY" "$ROOT/tests/train_torch_ref.py" bench steps=$((STEPS + 1)) threads="$THREADS"
    fi
done
# median tokens/s of the long runs; CPU s per step = (long - short) / STEPS, medians
med() { sort -n | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }
report() { # report NAME -> "tps cpu_per_step"
    local tps cpu
    tps=$(cut -d' ' -f1 "$tmp/$1" | med)
    cpu=$(paste -d' ' "$tmp/$1" "$tmp/${1}1" | awk -v s="$STEPS" '{print ($2 - $4) / s}' | med)
    echo "$tps $cpu"
}
read -r ttps tcpu <<< "$(report tern)"
printf "| engine | tokens/s (median, wall) | CPU s per step |\n|---|---|---|\n"
printf "| tern train (%s threads) | %.0f | %.2f |\n" "$THREADS" "$ttps" "$tcpu"
if [ -n "$PY" ]; then
    read -r ptps pcpu <<< "$(report torch)"
    printf "| PyTorch %s (%s threads) | %.0f | %.2f |\n" "$($PY -c 'import torch; print(torch.__version__)')" "$THREADS" "$ptps" "$pcpu"
    awk -v a="$ttps" -v b="$ptps" -v c="$tcpu" -v d="$pcpu" \
        'BEGIN { printf "\ntern / PyTorch: %.2fx tokens/s, %.2fx less CPU per step\n", a / b, d / c }'
else
    echo "(no python3 with torch: install python3-torch for the side-by-side)"
fi
