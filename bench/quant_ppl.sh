#!/usr/bin/env bash
# quant_ppl.sh — what each quantization costs on a real model, and whether tern computes it as the
# peer does: for an installed model (tern models) and each TYPE, `tern quantize` writes the file,
# then `tern perplexity` and the peer's `llama-perplexity` run on that same file and text; one
# markdown row per file: size, tern's PPL, the peer's, their difference, and tern's PPL against
# the installed file's (the quantization's own cost).
#
#   bench/quant_ppl.sh --peer PATH/llama-perplexity [--peer-args "-ub 1"] [--text FILE]
#                      [--types "q8_0 q6_k q4_k_m q4_0"] [-c 512] [-t 2] [--keep DIR] MODEL...
#
# It only RUNS the peer binary you give it; it never builds or downloads one. Files go to --keep
# DIR (default: a temporary folder removed at the end).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
tern=${TERN:-$here/../build/bin/tern}
peer="" peer_args="" text=/usr/share/common-licenses/GPL-3 types="q8_0 q6_k q4_k_m q4_0"
ctx=512 threads=2 keep=""
models=()
while [ $# -gt 0 ]; do
    case "$1" in
    --peer) peer=$2; shift 2 ;;
    --peer-args) peer_args=$2; shift 2 ;;
    --text) text=$2; shift 2 ;;
    --types) types=$2; shift 2 ;;
    -c) ctx=$2; shift 2 ;;
    -t) threads=$2; shift 2 ;;
    --keep) keep=$2; shift 2 ;;
    -h|--help) sed -n 2,13p "$0"; exit 0 ;;
    -*) echo "quant_ppl.sh: unknown option $1" >&2; exit 2 ;;
    *) models+=("$1"); shift ;;
    esac
done
[ -n "$peer" ] && [ -x "$peer" ] || { echo "quant_ppl.sh: --peer PATH to llama-perplexity is required" >&2; exit 2; }
[ ${#models[@]} -gt 0 ] || { echo "quant_ppl.sh: name at least one installed model" >&2; exit 2; }
[ -f "$text" ] || { echo "quant_ppl.sh: no text file $text" >&2; exit 2; }
dir=${keep:-$(mktemp -d)}
mkdir -p "$dir"
[ -n "$keep" ] || trap 'rm -rf "$dir"' EXIT

tern_ppl() { "$tern" perplexity -m "$1" -f "$text" -c "$ctx" -t "$threads" --json 2>/dev/null | jq -r .ppl; }
# shellcheck disable=SC2086
peer_ppl() { "$peer" -m "$1" -f "$text" -c "$ctx" -t "$threads" $peer_args 2>&1 |
             sed -n 's/^Final estimate: PPL.*= *\([0-9.]*\) +\/- .*/\1/p'; }  # ik: "PPL over N chunks for n_ctx=C = X +/- E"

echo "| model | type | MiB | tern PPL | peer PPL | tern vs peer | tern vs installed file |"
echo "|---|---|---:|---:|---:|---:|---:|"
for m in "${models[@]}"; do
    src=$("$tern" models --json | jq -r --arg n "$m" '.[] | select(.name == $n) | .path')
    [ -n "$src" ] || { echo "quant_ppl.sh: $m is not installed (tern models)" >&2; exit 1; }
    base=$(tern_ppl "$src")
    for t in installed $types; do
        f=$src
        if [ "$t" != installed ]; then
            f=$dir/$m-$t.gguf
            "$tern" quantize "$src" "$f" "$t" 2>/dev/null
        fi
        a=$(tern_ppl "$f"); b=$(peer_ppl "$f")
        awk -v m="$m" -v t="$t" -v s="$(stat -c %s "$f")" -v a="$a" -v b="$b" -v base="$base" 'BEGIN {
            d = (b == "" ? "peer failed" : sprintf("%+.2f %%", 100 * (a / b - 1)));
            printf "| %s | %s | %.1f | %.4f | %s | %s | %+.2f %% |\n", m, t, s / 1048576, a, (b == "" ? "-" : b), d, 100 * (a / base - 1) }'
    done
done
