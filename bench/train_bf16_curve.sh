#!/bin/sh
# train_bf16_curve.sh — does `tern train --matmul bf16` follow the F32 loss curve?
#
# Trains one small llama model twice from the same seed, on the same slice of a conversation
# corpus in the same order, once with every matrix product in F32 and once in BF16 (operands
# rounded to BF16, F32 sums: src/kernels/gemm_bf16.c), both on one thread and side by side,
# then prints the mean training loss per window of steps and the validation losses of both.
# The model (n_embd 192, 4 layers, 6 heads / 2 KV heads, n_ff 512, vocab of the tokenizer,
# n_ctx 1536, 3072 tokens per step, lr 3e-3 with cosine to 3e-4) is a scaled-down tern-tool.
#
# Usage: bench/train_bf16_curve.sh TRAIN.jsonl VAL.jsonl TOKENIZER.gguf [STEPS] [OUTDIR]
#   (e.g. the corpus of `tern corpus toolcalls` and the tokenizer of `tern tokenizer train`;
#   the first 4000 training and 200 validation conversations are used; STEPS default 500,
#   OUTDIR default a new directory under /tmp; TERN=path/to/tern overrides build/bin/tern)
# Needs a CPU with AVX512-BF16. Takes ~10 CPU minutes per run at 500 steps.
set -e
[ $# -ge 3 ] || { echo "usage: $0 TRAIN.jsonl VAL.jsonl TOKENIZER.gguf [STEPS] [OUTDIR]" >&2; exit 2; }
TRAIN=$1 VAL=$2 TOK=$(realpath "$3") STEPS=${4:-500}
OUT=${5:-$(mktemp -d /tmp/tern-bf16-curve.XXXXXX)}
TERN=${TERN:-build/bin/tern}
mkdir -p "$OUT"
head -n 4000 "$TRAIN" > "$OUT/train.jsonl"
head -n 200 "$VAL" > "$OUT/val.jsonl"
cat > "$OUT/config.json" <<EOF
{"arch": "llama", "n_embd": 192, "n_layer": 4, "n_head": 6, "n_head_kv": 2, "n_ff": 512, "n_ctx": 1536,
 "tied_output": true, "tokenizer": "$TOK",
 "lr": 0.003, "lr_min": 0.0003, "warmup": 50, "steps": $STEPS, "batch_tokens": 3072, "accum": 1,
 "weight_decay": 0.1, "beta1": 0.9, "beta2": 0.95, "clip": 1.0, "init_std": 0.02, "seed": 7,
 "threads": 1, "ckpt_every": 0}
EOF
for m in f32 bf16; do
    "$TERN" train --config "$OUT/config.json" --matmul $m --data "$OUT/train.jsonl" --loss-on-prompt \
        --val "$OUT/val.jsonl" --val-every 100 -o "$OUT/model-$m.gguf" --checkpoint-dir "$OUT/ckpt-$m" \
        --json > "$OUT/$m.jsonl" 2> "$OUT/$m.err" &
done
wait
echo "outputs in $OUT"
# mean training loss per 50 steps, and every validation, side by side
awk -v W=50 '
    function num(s, key,   i, r) { i = index(s, "\"" key "\":"); if (!i) return ""; r = substr(s, i + length(key) + 3); sub(/[,}].*/, "", r); return r }
    FNR == 1 { f++ }
    {
        st = num($0, "step"); v = num($0, "val_loss"); l = num($0, "loss")
        if (v != "") { val[f, st] = v; if (!(st in seen)) { seen[st] = 1; vs[++nv] = st + 0 } ; next }
        if (l != "" && num($0, "tokens_per_s") != "") { w = int((st - 1) / W); sum[f, w] += l; n[f, w]++; if (w > mw) mw = w }
    }
    END {
        printf "%-12s %10s %10s %10s\n", "steps", "f32", "bf16", "bf16-f32"
        for (w = 0; w <= mw; w++) {
            if (!n[1, w] || !n[2, w]) continue
            a = sum[1, w] / n[1, w]; b = sum[2, w] / n[2, w]
            printf "%4d-%-7d %10.4f %10.4f %+10.4f\n", w * W + 1, (w + 1) * W, a, b, b - a
        }
        for (i = 2; i <= nv; i++) for (j = i; j > 1 && vs[j - 1] > vs[j]; j--) { t = vs[j]; vs[j] = vs[j - 1]; vs[j - 1] = t }
        for (i = 1; i <= nv; i++) { s = vs[i]; if (!((1, s) in val) || !((2, s) in val)) continue; printf "val @%-6d %10.4f %10.4f %+10.4f\n", s, val[1, s], val[2, s], val[2, s] - val[1, s] }
    }' "$OUT/f32.jsonl" "$OUT/bf16.jsonl"
