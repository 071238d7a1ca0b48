#!/usr/bin/env bash
# grammar_schemas.sh — `tern grammar bench` over the tool schemas of the grammar tests, one table.
#
# For every tests/data/grammar/schemas/*.json it takes the file's "schema" member, runs
# `tern grammar bench --json-schema ... --cpu-clock --json` on the given vocabulary (one thread:
# compile time = median of --reps fresh compiles, mask time per token over walks of 64 documents
# generated from the grammar, first visits of grammar positions included), and prints one
# markdown table: a row per schema (compile ms, mask p50/p99/max µs, masks timed), then the
# median and the worst of each column over all schemas and the schemas over the targets of docs/tools.md
# (mask p50 <= 10 µs, p99 <= 500 µs, max <= 5 ms; compile <= 5 ms). Thread CPU time, so other
# processes on the machine do not inflate it, though they still share caches and memory
# bandwidth with it: say so when quoting figures taken on a busy machine.
#
# Needs: bash, jq, awk. Raw JSON per schema is kept in --keep DIR.
set -u

here=$(cd "$(dirname "$0")" && pwd)
repo=$(dirname "$here")

usage() {
    cat <<EOF
usage: bench/grammar_schemas.sh [options]

  --tern PATH     tern binary (default: $repo/build/bin/tern)
  -m VOCAB        GGUF model or vocab-only GGUF (default: the Qwen2 vocabulary,
                  $repo/../shared/fixtures/tokenizer/ggml-vocab-qwen2-tiktoken.gguf)
  --schemas DIR   directory of {"schema": ...} files (default: $repo/tests/data/grammar/schemas)
  --reps N        compiles to time per schema (default: 20)
  --keep DIR      keep each schema's JSON report and stderr in DIR
  -h, --help      this text
EOF
}

tern=$repo/build/bin/tern
vocab=$repo/../shared/fixtures/tokenizer/ggml-vocab-qwen2-tiktoken.gguf
schemas=$repo/tests/data/grammar/schemas
reps=20
keep=
while [ $# -gt 0 ]; do
    case $1 in
        --tern) tern=$2; shift 2 ;;
        -m) vocab=$2; shift 2 ;;
        --schemas) schemas=$2; shift 2 ;;
        --reps) reps=$2; shift 2 ;;
        --keep) keep=$2; shift 2 ;;
        -h|--help) usage; exit 0 ;;
        *) echo "grammar_schemas.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
done
for tool in jq awk; do
    command -v $tool >/dev/null || { echo "grammar_schemas.sh: needs $tool" >&2; exit 2; }
done
[ -x "$tern" ] || { echo "grammar_schemas.sh: no tern binary at $tern (build first, or --tern PATH)" >&2; exit 2; }
[ -f "$vocab" ] || { echo "grammar_schemas.sh: no vocabulary at $vocab (-m VOCAB)" >&2; exit 2; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
out=${keep:-$work}
mkdir -p "$out"

rows=$work/rows.tsv
: > "$rows"
for f in "$schemas"/*.json; do
    name=$(basename "$f" .json)
    jq '.schema' "$f" > "$work/$name.schema.json" || { echo "grammar_schemas.sh: $f: no schema member" >&2; exit 1; }
    if ! "$tern" grammar bench -m "$vocab" --json-schema "$work/$name.schema.json" --cpu-clock --reps "$reps" \
        --json > "$out/$name.json" 2> "$out/$name.err"; then
        echo "grammar_schemas.sh: $name: $(head -n 1 "$out/$name.err")" >&2
        exit 1
    fi
    jq -r --arg n "$name" '[$n, .compile_ms, .mask_us_p50, .mask_us_p99, .mask_us_max, .n_tokens] | @tsv' \
        "$out/$name.json" >> "$rows"
done

echo "| schema | compile ms | mask p50 µs | mask p99 µs | mask max µs | masks |"
echo "|---|---:|---:|---:|---:|---:|"
awk -F'\t' '{ printf "| %s | %.2f | %.2f | %.1f | %.0f | %d |\n", $1, $2, $3, $4, $5, $6 }' "$rows"
# median and worst per column, then the schemas over each target
for col in 2 3 4 5; do
    cut -f$col "$rows" | sort -g > "$work/col$col"
done
med() { awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }' "$1"; }
worst() { tail -n 1 "$1"; }
printf '| **median** | %.2f | %.2f | %.1f | %.0f | |\n' "$(med "$work/col2")" "$(med "$work/col3")" "$(med "$work/col4")" "$(med "$work/col5")"
printf '| **worst** | %.2f | %.2f | %.1f | %.0f | |\n' "$(worst "$work/col2")" "$(worst "$work/col3")" "$(worst "$work/col4")" "$(worst "$work/col5")"
echo
awk -F'\t' '
    $3 > 10   { p50 = p50 " " $1 " (" $3 " µs)" }
    $4 > 500  { p99 = p99 " " $1 " (" $4 " µs)" }
    $5 > 5000 { mx = mx " " $1 " (" $5 " µs)" }
    $2 > 5    { c = c " " $1 " (" $2 " ms)" }
    END {
        print "over mask p50 10 µs:" (p50 ? p50 : " none")
        print "over mask p99 500 µs:" (p99 ? p99 : " none")
        print "over mask max 5 ms:" (mx ? mx : " none")
        print "over compile 5 ms:" (c ? c : " none")
    }' "$rows"
